package ib

import (
	"fmt"
	"net"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/btl/netif"
	"github.com/gobtl/gobtl/core"
)

// Params is the schema of a btl "ib" block, netif's if_include and
// if_exclude (softrc) included.
var Params = append([]core.Param{
	{Name: "provider", Type: core.ParamString, Default: "softrc", Enum: []string{"softrc", "rdmacore", "sim"},
		Doc: "verbs provider: softrc (software HCA over TCP, always built), rdmacore (libibverbs; build tag rdmacore) or sim (simulated HCA in virtual time, under gobtl sim)"},
	{Name: "device", Type: core.ParamString, Default: "",
		Doc: "HCA name; softrc: any name (one device per name and rank), default softrc0; rdmacore: as ibv_devices lists it, default the first"},
	{Name: "port", Type: core.ParamInt, Default: "1", Doc: "HCA port, from 1", Min: "1", Max: "255"},
	{Name: "paths", Type: core.ParamInt, Default: "1", Min: "1", Max: "16",
		Doc: "RC connections per peer over this port (LMC paths); each is a module, one subchannel of the peer's virtual channel"},
	{Name: "address", Type: core.ParamString, Default: "",
		Doc: "softrc: IP address, interface name or host name the port listens on and publishes; unset: chosen by if_include/if_exclude, else loopback on one node and the first up, non-loopback interface when the job spans nodes"},
	{Name: "rate", Type: core.ParamRate, Default: "",
		Doc: "softrc: link rate of the port, e.g. 1GB/s for 4x and 250MB/s for 1x; unset: unlimited"},
	{Name: "delay", Type: core.ParamDuration, Default: "0s",
		Doc: "softrc: extra latency of every packet leaving the port (a longer path; rails of different latency, seed 001 §4.4)"},
	{Name: "link", Type: core.ParamString, Default: "",
		Doc: "softrc: name of the physical link the port stands for; ports of processes on this host that name the same link share its rate (a token bucket in /dev/shm), as two jobs on one node share an HCA port. %r is replaced by the rank (rank r of each job on node r), %% by %"},
	{Name: "idle_after", Type: core.ParamDuration, Default: "200us", Min: "1ns",
		Doc: "softrc: the device's own goroutine serves the wire once the process has not polled for this long"},
	{Name: "nic_thread", Type: core.ParamString, Default: "shared", Enum: []string{"shared", "pinned"},
		Doc: "softrc: shared: the device's NIC work shares the application's cores; pinned: it runs on an OS thread of its own pinned to nic_cpu, and the process's other threads keep off that CPU (overlap needs a core the ranks do not compute on, seed 004 §5.1)"},
	{Name: "nic_cpu", Type: core.ParamInt, Default: "-1", Min: "-1",
		Doc: "softrc: the CPU of a pinned NIC thread; -1: of the CPUs the process may use, the last for its node's first rank, the one before for the second, and so on"},
	core.BTLParam("eager_limit", "12KiB"),
	core.BTLParam("rndv_eager_limit", "0"),
	{Name: "receive_queues", Type: core.ParamString, Default: "",
		Doc: "receive queues in Open MPI syntax (P,size,count,low,window:S,size,count,low,max_pending:...): the layout of the default recvbuf policy, srq, when the job configures none; unset: srq's own"},
	{Name: "send_queue", Type: core.ParamInt, Default: "256", Min: "4", Max: "16384", Doc: "send work requests per QP"},
	{Name: "max_rd_atomic", Type: core.ParamInt, Default: "16", Min: "1", Max: "16",
		Doc: "RDMA reads outstanding per QP (max_rd_atomic and max_dest_rd_atomic)"},
	{Name: "min_rnr_timer", Type: core.ParamDuration, Default: "10us", Min: "1ns",
		Doc: "how long a sender NAKed for lack of a receive buffer waits before it retries (rounded up to the IBA's codes)"},
	{Name: "rnr_retry", Type: core.ParamInt, Default: "7", Min: "0", Max: "7", Doc: "RNR retries before a QP fails; 7 is forever"},
	{Name: "retry_count", Type: core.ParamInt, Default: "7", Min: "0", Max: "7", Doc: "retransmissions after an ACK timeout before a QP fails"},
	{Name: "timeout", Type: core.ParamInt, Default: "18", Min: "1", Max: "31", Doc: "ACK timeout code: 4.096 µs × 2^timeout"},
	{Name: "reg_cache_size", Type: core.ParamSize, Default: "256MiB", Doc: "registered user memory kept for reuse (the pin-down cache)"},
	core.BTLParam("bandwidth", "5GB/s").WithDoc("used when the port has no rate"),
	core.BTLParam("latency", "5us").WithRange("1ns", ""),
	core.BTLParam("exclusivity", "50"),
	{Name: "cm_timeout", Type: core.ParamDuration, Default: "50ms", Min: "1ns",
		Doc: "first retransmission interval of a connection request (doubling, up to 1s)"},
	{Name: "cm_retries", Type: core.ParamInt, Default: "20", Min: "1", Max: "1000", Doc: "connection request retransmissions before the peer counts as lost"},
	{Name: "rndv_on_no_credit", Type: core.ParamBool, Default: "false",
		Doc: "ask the PML for rendezvous while a per-peer queue is out of credits (seed 000 §4.2)"},
}, netif.Params()...) // softrc's address choice: if_include, if_exclude

// config is a decoded block.
type config struct {
	provider, device, address string
	include, exclude          string // softrc: netif's if_include, if_exclude
	port                      uint8
	paths                     int
	rate                      float64
	delay                     time.Duration
	link                      string
	idleAfter                 time.Duration
	pinNIC                    bool
	nicCPU                    int
	eagerLimit, rndvEager     int
	sendQueue                 int
	maxRdAtomic               uint8
	minRNR                    uint8
	rnrRetry, retryCnt        uint8
	timeout                   uint8
	regCache                  int64
	bandwidth                 float64
	latency                   time.Duration
	exclusivity               int
	cmTimeout                 time.Duration
	cmRetries                 int
	rndvOnNoCredit            bool
}

func parseConfig(p core.Params) (*config, error) {
	c := &config{
		provider: p.String("provider"), device: p.String("device"), address: p.String("address"),
		port: uint8(p.Int("port")), paths: p.Int("paths"), rate: p.Rate("rate"), delay: p.Duration("delay"), link: p.String("link"), idleAfter: p.Duration("idle_after"),
		pinNIC: p.String("nic_thread") == "pinned", nicCPU: p.Int("nic_cpu"),
		eagerLimit: int(p.Size("eager_limit")), rndvEager: int(p.Size("rndv_eager_limit")), sendQueue: p.Int("send_queue"),
		maxRdAtomic: uint8(p.Int("max_rd_atomic")), minRNR: verbs.RNRTimerCode(p.Duration("min_rnr_timer")),
		rnrRetry: uint8(p.Int("rnr_retry")), retryCnt: uint8(p.Int("retry_count")), timeout: uint8(p.Int("timeout")),
		regCache: p.Size("reg_cache_size"), bandwidth: p.Rate("bandwidth"), latency: p.Duration("latency"),
		exclusivity: p.Int("exclusivity"), cmTimeout: p.Duration("cm_timeout"), cmRetries: p.Int("cm_retries"),
		rndvOnNoCredit: p.Bool("rndv_on_no_credit"),
		include:        p.String(netif.ParamInclude), exclude: p.String(netif.ParamExclude),
	}
	if c.provider != "softrc" {
		for _, n := range []string{"address", "rate", "delay", "link", "idle_after", "nic_thread", "nic_cpu", netif.ParamInclude, netif.ParamExclude} {
			if p.IsSet(n) {
				return nil, fmt.Errorf("ib: %s is a softrc parameter; provider is %s", n, c.provider)
			}
		}
	}
	if c.address != "" && (c.include != "" || c.exclude != "") {
		return nil, fmt.Errorf("ib: address names the port's address outright; %s and %s choose one: set either", netif.ParamInclude, netif.ParamExclude)
	}
	if c.device == "" && c.provider == "softrc" {
		c.device = "softrc0"
	}
	if c.eagerLimit < 0 || c.rndvEager < 0 {
		return nil, fmt.Errorf("ib: eager_limit and rndv_eager_limit must not be negative")
	}
	if c.delay < 0 {
		return nil, fmt.Errorf("ib: delay must not be negative")
	}
	if c.link != "" && c.rate <= 0 {
		return nil, fmt.Errorf("ib: link %q needs a rate: the ports on a link share its rate", c.link)
	}
	if err := checkLinkName(c.link); err != nil {
		return nil, err
	}
	if c.bandwidth <= 0 {
		return nil, fmt.Errorf("ib: bandwidth must be positive")
	}
	return c, nil
}

// checkLinkName accepts %r and %% only.
func checkLinkName(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+1 < len(s) && (s[i+1] == 'r' || s[i+1] == '%') {
			i++
			continue
		}
		return fmt.Errorf("ib: link %q: %% may only be followed by r (the rank) or %%", s)
	}
	return nil
}

// linkName expands %r to rank and %% to % in a link name.
func linkName(s string, rank int) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+1 < len(s) {
			switch s[i+1] {
			case 'r':
				b = fmt.Appendf(b, "%d", rank)
				i++
				continue
			case '%':
				b = append(b, '%')
				i++
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

// softrcAddress is the address a softrc port listens on and publishes:
// one the other ranks can reach (netif), never loopback when the job
// spans nodes.
func (c *config) softrcAddress(spans bool) (string, error) {
	var ip net.IP
	var err error
	if c.address != "" {
		ip, err = netif.Check(c.address, spans)
	} else {
		ip, err = netif.Select(netif.Choice{Include: c.include, Exclude: c.exclude, Spans: spans})
	}
	if err != nil {
		return "", fmt.Errorf("ib: softrc port address: %w", err)
	}
	return ip.String(), nil
}
