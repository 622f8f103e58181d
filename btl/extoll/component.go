package extoll

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/btl/extoll/softnic"
	"github.com/gobtl/gobtl/btl/extoll/velo"
	"github.com/gobtl/gobtl/btl/netif"
	"github.com/gobtl/gobtl/core"
)

// Name is the component name.
const Name = "extoll"

// Exclusivity of EXTOLL modules: a network, below shared memory.
const Exclusivity = 50

// DefaultFlowControl is the policy a job without a flow_control policy
// runs (core.Component.Defaults).
const DefaultFlowControl = "extoll_dynamic"

// Params is the HCL schema of btl "extoll".
var Params = append([]core.Param{
	{Name: "slots_per_peer", Type: core.ParamInt, Default: "58", Min: "1",
		Doc: "mailbox slots per rank of the job, credit region included (seed 003 §5.3: 58 gives a low overhead)"},
	{Name: "mailbox_slots", Type: core.ParamInt, Default: "0", Min: "0",
		Doc: "total mailbox slots; overrides slots_per_peer when set"},
	{Name: "piggyback", Type: core.ParamBool, Default: "true",
		Doc: "piggyback credits on data packets with room (seed 003 §5.4)"},
	core.BTLParam("eager_limit", "2KiB").WithDoc("as VELO packets; larger ones go by RMA get (seed 003 §3)"),
	core.BTLParam("max_send_size", "2KiB").WithDoc("at least eager_limit and 344 bytes for a rendezvous start"),
	core.BTLParam("max_reads", "16").WithRange("1", ""),
	{Name: "backlog", Type: core.ParamInt, Default: "0", Min: "0",
		Doc: "packets that may wait for credits per destination; 0 means four of the largest trains"},
	{Name: "stall_timeout", Type: core.ParamDuration, Default: "30s",
		Doc: "how long a send may block on a full mailbox (only without flow control) before failing with core.ErrStalled; 0 blocks forever, as the hardware does"},
	{Name: "transport", Type: core.ParamString, Default: "auto", Enum: []string{"auto", "shm", "tcp", "sim"},
		Doc: "how packets reach a peer: shared memory on this host and TCP elsewhere (auto), or always one of them; sim is the simulated card of a job under gobtl sim (node_size ranks share a card)"},
	{Name: "listen", Type: core.ParamString, Default: "",
		Doc: "address (IP, interface or host name) the TCP engines listen on and publish; unset: chosen by if_include/if_exclude, else loopback on one node and the first up, non-loopback interface when the job spans nodes"},
	{Name: "shm_dir", Type: core.ParamString, Default: "/dev/shm", Doc: "directory of the mailbox and address-translation files, named gobtl-<job>-extoll-<instance>-<rank>-<random>.mbox/.att, made exclusively, 0600, their pages reserved at start"},
	{Name: "socket_buffer", Type: core.ParamSize, Default: "16KiB",
		Doc: "TCP socket buffers, the slack between a full mailbox and a blocked remote sender"},
	{Name: "node_size", Type: core.ParamInt, Default: "0", Min: "0",
		Doc: "pretend every node_size consecutive ranks are one node (experiments on one host); 0 uses real hosts"},
	{Name: "local_peers", Type: core.ParamString, Default: "extoll", Enum: []string{"extoll", "exclude"},
		Doc: "exclude leaves ranks of the same node to another BTL such as sm; they then use no credits (seed 003 §7.2)"},
	core.BTLParam("bandwidth", "1GB/s"),
	core.BTLParam("latency", "2us"),
}, netif.Params()...) // the TCP engines' address choice

func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL, Name: Name, Params: Params, OpenBTL: open, Reach: core.ReachNetwork,
		Defaults: map[core.Kind]string{core.KindFlowControl: DefaultFlowControl},
		Doc:      "EXTOLL: eager frames as VELO packets into a mailbox with credit flow control (none, extoll_static, extoll_dynamic), rendezvous by RMA get (seed 003). Runs on the software device (shared memory on a host, TCP between hosts).",
	})
}

func open(env core.BTLEnv) ([]core.Module, error) {
	p := env.Params
	boot := env.Boot
	rank, size := boot.Rank(), boot.Size()
	key := "extoll." + env.Instance
	slots := p.Int("mailbox_slots")
	if slots == 0 {
		slots = p.Int("slots_per_peer") * size
	}
	if p.String("transport") == "sim" {
		return openSim(env, slots)
	}
	tr, err := softnic.ParseTransport(p.String("transport"))
	if err != nil {
		return nil, err
	}
	// The engine's nodes are hosts even when they share a kernel (network
	// namespaces): mailboxes in shared memory only within one.
	host := ""
	nodeSize := p.Int("node_size")
	loc := env.Locality
	switch {
	case nodeSize > 0:
		host = fmt.Sprintf("%s/node%d", hostID(), rank/nodeSize)
	case core.SpansNodes(loc):
		host = fmt.Sprintf("%s/%s/node%d", hostID(), boot.JobID(), loc.Node(rank))
	}
	listen, err := listenAddr(p, core.SpansNodes(loc))
	if err != nil {
		return nil, err
	}
	jobKey, err := env.Key()
	if err != nil {
		return nil, fmt.Errorf("extoll: %w", err)
	}
	cfg := config(env, slots)
	cfg.Device = softnic.Config{
		Dir: p.String("shm_dir"), ListenHost: listen, HostID: host, Key: jobKey,
		Transport: tr, StallTimeout: p.Duration("stall_timeout"), SocketBuffer: int(p.Size("socket_buffer")),
		Resolve: func(ctx context.Context, r int) (softnic.Addr, error) {
			b, err := lookup(ctx, boot, r, key)
			if err != nil {
				return softnic.Addr{}, err
			}
			return softnic.DecodeAddr(b)
		},
	}
	if p.String("local_peers") == "exclude" {
		switch {
		case nodeSize > 0:
			node := rank / nodeSize
			cfg.Reachable = func(r int) bool { return r/nodeSize != node }
		case loc != nil:
			node := loc.Node(rank)
			cfg.Reachable = func(r int) bool { return loc.Node(r) != node }
		}
	}
	m, addr, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	if err := boot.Put(key, addr.Encode()); err != nil {
		m.Close()
		return nil, fmt.Errorf("extoll: publish address: %w", err)
	}
	// The job fences after opening its BTLs (the modex); connections are
	// made at first use, after it.
	return []core.Module{m}, nil
}

// config is the module's configuration from the block's parameters,
// the device's apart.
func config(env core.BTLEnv, slots int) Config {
	p := env.Params
	return Config{
		Rank: env.Boot.Rank(), Size: env.Boot.Size(), Instance: env.Instance, JobID: env.Boot.JobID(),
		Slots: slots, Policy: env.FlowControl, Piggyback: p.Bool("piggyback"),
		EagerLimit: int(p.Size("eager_limit")), MaxSendSize: int(p.Size("max_send_size")),
		MaxReads: p.Int("max_reads"), Backlog: p.Int("backlog"),
		Bandwidth: p.Rate("bandwidth"), Latency: p.Duration("latency"),
		Clock: env.Clock, Metrics: env.Metrics, Log: env.Log,
	}
}

// Config opens a module directly (tests, embedding without HCL).
type Config struct {
	Rank, Size  int
	Instance    string
	JobID       string
	Slots       int
	Policy      core.FlowControl
	Piggyback   bool
	EagerLimit  int
	MaxSendSize int
	MaxReads    int
	Backlog     int
	Bandwidth   float64
	Latency     time.Duration
	Reachable   func(rank int) bool
	Clock       core.Clock
	Metrics     *core.Metrics
	Log         zerolog.Logger
	Device      softnic.Config
}

// Open opens a module on a software device and returns it with the
// address peers must be told.
func Open(cfg Config) (*Module, softnic.Addr, error) {
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock
	}
	if cfg.Metrics == nil {
		cfg.Metrics = core.NewMetrics()
	}
	prefix := core.MetricName(Name, cfg.Instance)
	dc := cfg.Device
	dc.Rank, dc.Size, dc.JobID, dc.Name, dc.Slots = cfg.Rank, cfg.Size, cfg.JobID, cfg.Instance, cfg.Slots
	dc.Clock, dc.Metrics, dc.Prefix = cfg.Clock, cfg.Metrics, prefix
	if dc.OnReject == nil {
		// The first connection that fails to prove it belongs to the job
		// is logged; the rest are counted (links_rejected).
		var once sync.Once
		log := cfg.Log
		dc.OnReject = func(err error) {
			once.Do(func() {
				log.Warn().Err(err).Msg("rejected connections that did not prove they belong to the job")
			})
		}
	}
	dev, err := softnic.Open(dc)
	if err != nil {
		return nil, softnic.Addr{}, fmt.Errorf("extoll: %w", err)
	}
	m, err := New(dev, cfg)
	if err != nil {
		dev.Close()
		return nil, softnic.Addr{}, err
	}
	dev.SetExtra(m.eng.Layout())
	m.peerLayout = func(rank int) (string, bool) {
		a, ok := dev.PeerAddr(rank)
		return a.Extra, ok
	}
	return m, dev.Addr(), nil
}

// minSendSize fits a rendezvous start with the PML's largest key list
// (24 fixed bytes and 8 keys of 40).
const minSendSize = 24 + 8*40

// New builds a module on any device.
func New(dev Device, cfg Config) (*Module, error) {
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock
	}
	if cfg.Metrics == nil {
		cfg.Metrics = core.NewMetrics()
	}
	if cfg.EagerLimit <= 0 {
		cfg.EagerLimit = 2048
	}
	if cfg.MaxSendSize < cfg.EagerLimit {
		cfg.MaxSendSize = max(cfg.EagerLimit, 2048)
	}
	if cfg.MaxSendSize < minSendSize {
		return nil, fmt.Errorf("extoll: max_send_size %d is below the %d bytes a rendezvous start needs", cfg.MaxSendSize, minSendSize)
	}
	train := trainLen(cfg.MaxSendSize)
	backlog := cfg.Backlog
	if backlog == 0 {
		backlog = 4 * train
	}
	if backlog < train {
		return nil, fmt.Errorf("extoll: a backlog of %d packets cannot hold one %d-packet train", backlog, train)
	}
	prefix := core.MetricName(Name, cfg.Instance)
	eng, err := velo.New(dev, velo.Config{
		Rank: cfg.Rank, Size: cfg.Size, Slots: dev.Slots(), Policy: cfg.Policy, Piggyback: cfg.Piggyback,
		Backlog: backlog, Clock: cfg.Clock, Metrics: cfg.Metrics, Prefix: prefix, Log: cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("extoll: %w", err)
	}
	name := "extoll"
	if cfg.Instance != "" {
		name += ":" + cfg.Instance
	}
	bw := cfg.Bandwidth
	if bw <= 0 {
		bw = 1e9
	}
	c := func(n string) *core.Counter { return cfg.Metrics.Counter(core.MetricName(prefix, n)) }
	m := &Module{
		dev: dev, eng: eng, log: cfg.Log, rank: cfg.Rank, size: cfg.Size, metrics: cfg.Metrics, clock: cfg.Clock,
		eps: make([]*endpoint, cfg.Size), lost: make([]error, cfg.Size), reachable: cfg.Reachable,
		pkts: make([]nic.Slot, train), rx: make([]reassembly, cfg.Size), maxRx: cfg.MaxSendSize,
		framesOut: c("frames_out"), framesIn: c("frames_in"), bytesOut: c("bytes_out"), bytesIn: c("bytes_in"),
		badFrames: c("bad_frames"), targetNotes: c("rma_target_notifications"),
	}
	m.attrs = core.Attrs{
		Component: Name, Name: name,
		EagerLimit: cfg.EagerLimit, MaxSendSize: cfg.MaxSendSize, RndvEagerLimit: 0,
		MaxReads: cfg.MaxReads, Bandwidth: bw, Latency: cfg.Latency, Exclusivity: Exclusivity,
	}
	return m, nil
}

// listenAddr is the address the TCP engines listen on and publish: the
// listen parameter, else netif's choice; never loopback when the job
// spans nodes.
func listenAddr(p core.Params, spans bool) (string, error) {
	inc, exc := p.String(netif.ParamInclude), p.String(netif.ParamExclude)
	var ip net.IP
	var err error
	if l := p.String("listen"); l != "" {
		if inc != "" || exc != "" {
			return "", fmt.Errorf("extoll: listen names the address outright; %s and %s choose one: set either", netif.ParamInclude, netif.ParamExclude)
		}
		ip, err = netif.Check(l, spans)
	} else {
		ip, err = netif.Select(netif.Choice{Include: inc, Exclude: exc, Spans: spans})
	}
	if err != nil {
		return "", fmt.Errorf("extoll: TCP address: %w", err)
	}
	return ip.String(), nil
}

func hostID() string {
	h, _ := os.Hostname()
	return h
}

// lookup gets what rank published under key, retrying until the fence
// that makes it visible has happened or ctx ends.
func lookup(ctx context.Context, boot core.Bootstrap, rank int, key string) ([]byte, error) {
	d := 100 * time.Microsecond
	for {
		b, err := boot.Get(ctx, rank, key)
		if err == nil {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("look up rank %d's %s: %w (last: %v)", rank, key, ctx.Err(), err)
		case <-time.After(d):
			d = min(2*d, 10*time.Millisecond)
		}
	}
}
