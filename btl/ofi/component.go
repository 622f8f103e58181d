package ofi

import (
	"errors"

	"github.com/gobtl/gobtl/core"
)

// Name is the component's name: btl "ofi" "<instance>" { ... }.
const Name = "ofi"

// DefaultRecvBuffers is the receive-buffer policy a job without one runs:
// Open MPI's default layout, one class of small per-peer buffers under
// credits and three of shared buffers by size (receive_queues sets it).
const DefaultRecvBuffers = "srq"

// ErrNotBuilt reports a gobtl built without libfabric.
var ErrNotBuilt = errors.New("ofi: this gobtl was built without libfabric (build tag ofi): " +
	"install libfabric-dev (make ofi-dev) and rebuild with make, which builds with GOTAGS=pmix,ofi, " +
	"or go build -tags ofi")

// Params is the schema of a btl "ofi" block.
var Params = []core.Param{
	{Name: "provider", Type: core.ParamString, Default: "tcp", Check: checkProvider,
		Doc: `libfabric provider, as fi_info -p names it: "tcp" (tcp under ofi_rxm), "sockets", "shm", "verbs", "efa", "cxi", "psm3", "opx"; gobtl info ofi lists those found`},
	{Name: "domain", Type: core.ParamString, Default: "", Check: checkDomain,
		Doc: `one domain (a NIC: "eth0", "mlx5_0", "shm") to open; unset: those of if_include, else one the provider offers (loopback on one node, the first other when the job spans nodes)`},
	{Name: "if_include", Type: core.ParamStrings, Default: "",
		Doc: `domains to open, one module (a rail) each, in order: by name ("eth0", "mlx5_0") or, for IP providers (tcp, sockets), by subnet ("10.0.0.0/24": the domain whose network lies within it, as btl_tcp_if_include); not together with domain`},
	core.BTLParam("eager_limit", "12KiB"),
	core.BTLParam("rndv_eager_limit", "0"),
	core.BTLParam("max_reads", "16"),
	core.BTLParam("bandwidth", "1GB/s"),
	core.BTLParam("latency", "20us").WithRange("1ns", ""),
	core.BTLParam("exclusivity", "40"),
	{Name: "receive_queues", Type: core.ParamString, Default: "",
		Doc: "receive classes in Open MPI syntax (P,size,count,low,window:S,size,count,low,max_pending:...): the layout of the default recvbuf policy, srq, when the job configures none; unset: srq's own"},
	{Name: "send_buffers", Type: core.ParamInt, Default: "64", Min: "4", Max: "4096",
		Doc: "send buffers per receive class (frames above the provider's inject size wait in one until their send completes)"},
	{Name: "reg_cache_size", Type: core.ParamSize, Default: "256MiB",
		Doc: "registered user memory kept for reuse (gobtl's cache: libfabric's own is off, it cannot see Go free memory)"},
	{Name: "probe_interval", Type: core.ParamDuration, Default: "1s", Min: "1ms",
		Doc: "a peer on another host that has sent nothing for this long is probed; a probe the provider cannot deliver loses the peer"},
	{Name: "peer_timeout", Type: core.ParamDuration, Default: "30s", Min: "1ms",
		Doc: "a peer on another host whose probes the provider has refused for this long (tcp's way of saying the peer is gone), with nothing else in flight to it, is lost"},
}

func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL, Name: Name,
		Doc: "libfabric reliable-datagram endpoints (tcp, sockets, shm, verbs, efa, cxi, psm3, opx providers): " +
			"eager sends into receive classes under credits, RDMA read and write, a wait fd for interrupts, " +
			"one module per domain, every peer proven by the job key",
		Params:   Params,
		OpenBTL:  open,
		Defaults: map[core.Kind]string{core.KindRecvBuf: DefaultRecvBuffers},
		Reach:    core.ReachNetwork,
	})
}

// ProviderInfo is one provider and domain libfabric offers, as gobtl info
// ofi lists it.
type ProviderInfo struct {
	Provider, Fabric, Domain string
	EPType, AddrFormat       string
	Caps, MRMode, MsgOrder   string
	InjectSize, TxSize       int
	RxSize                   int
	MaxMsgSize               uint64
	DataProgress             string
	// AuthKeySize is nonzero where the provider can fence jobs in the
	// fabric by a domain's authorization key (cxi, efa); gobtl runs with
	// the provider's default key (fence.go).
	AuthKeySize int
}
