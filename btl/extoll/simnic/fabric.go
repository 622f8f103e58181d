package simnic

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/mailbox"
	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/sim"
)

// DefaultLink is an EXTOLL port of the seed 003 cluster's kind, to the
// order of magnitude: about a microsecond from process to process, a
// VELO packet every 100 ns, 1 GB/s for RMA.
var DefaultLink = sim.Link{Latency: time.Microsecond, Overhead: 200 * time.Nanosecond, Gap: 100 * time.Nanosecond, Rate: 1e9}

// Fabric is the simulated EXTOLL network of one job: every card and
// every process's device on them.
type Fabric struct {
	s     *sim.Sched
	model func(node int, name string) sim.Link
	devs  map[string][]*Device   // by instance name, then rank
	ports map[string][]*sim.Port // by instance name, then node
	order []*Device
}

const fabricKey = "btl/extoll/simnic"

// FabricOf returns the fabric of the job s schedules.
func FabricOf(s *sim.Sched) *Fabric {
	return s.Value(fabricKey, func() any {
		return &Fabric{s: s, devs: map[string][]*Device{}, ports: map[string][]*sim.Port{},
			model: func(int, string) sim.Link { return DefaultLink }}
	}).(*Fabric)
}

// SetModel sets the link model of every card opened from now on: node
// is the card's node, name the BTL instance.
func (f *Fabric) SetModel(m func(node int, name string) sim.Link) { f.model = m }

// Devices are the devices opened so far, in the order they were opened.
func (f *Fabric) Devices() []*Device { return f.order }

// Config opens a rank's device.
type Config struct {
	// JobID names the simulated job (its scheduler's id).
	JobID string
	// Rank and Size place the process; Name is the BTL instance, so that
	// two extoll blocks are two cards.
	Rank, Size int
	Name       string
	// Slots is the mailbox size in packets.
	Slots int
	// NodeSize ranks share a card (0 or 1: one each).
	NodeSize int
	// StallTimeout bounds a send blocked on a full mailbox, in virtual
	// time; 0 blocks forever, as the hardware does.
	StallTimeout time.Duration
	// Metrics receives velo_blocked, velo_blocked_ns and velo_stalls
	// under Prefix, as softnic names them.
	Metrics *core.Metrics
	Prefix  string
}

// Open opens rank's device in the job cfg.JobID, which must be a
// registered simulated job.
func Open(cfg Config) (*Device, error) {
	s := sim.Lookup(cfg.JobID)
	if s == nil {
		return nil, fmt.Errorf("simnic: job %q is not a simulated job (run it under gobtl sim)", cfg.JobID)
	}
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size || cfg.Size-1 > nic.MaxRank {
		return nil, fmt.Errorf("simnic: rank %d of %d", cfg.Rank, cfg.Size)
	}
	if cfg.Slots < mailbox.MinSlots {
		return nil, fmt.Errorf("simnic: a mailbox of %d slots (at least %d)", cfg.Slots, mailbox.MinSlots)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = core.NewMetrics()
	}
	f := FabricOf(s)
	devs := f.devs[cfg.Name]
	if devs == nil {
		devs = make([]*Device, cfg.Size)
		f.devs[cfg.Name] = devs
	}
	if len(devs) != cfg.Size {
		return nil, fmt.Errorf("simnic: rank %d opens %q in a job of %d, others of %d", cfg.Rank, cfg.Name, cfg.Size, len(devs))
	}
	if d := devs[cfg.Rank]; d != nil && !d.closed {
		return nil, fmt.Errorf("simnic: rank %d's device %q is already open", cfg.Rank, cfg.Name)
	}
	node := cfg.Rank
	if cfg.NodeSize > 1 {
		node = cfg.Rank / cfg.NodeSize
	}
	ports := f.ports[cfg.Name]
	for len(ports) <= node {
		ports = append(ports, nil)
	}
	if ports[node] == nil {
		ports[node] = &sim.Port{Link: f.model(node, cfg.Name)}
	}
	f.ports[cfg.Name] = ports
	c := func(n string) *core.Counter { return cfg.Metrics.Counter(core.MetricName(cfg.Prefix, n)) }
	d := &Device{
		f: f, s: s, cfg: cfg, node: node, port: ports[node], peers: devs,
		regions: map[uint64]*region{}, out: make([]int32, cfg.Size),
		blocked: c("velo_blocked"), blockedNS: c("velo_blocked_ns"), stalls: c("velo_stalls"),
	}
	d.st.Mailbox = int64(cfg.Slots) * nic.SlotSize
	devs[cfg.Rank] = d
	f.order = append(f.order, d)
	return d, nil
}
