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
	devs  map[string][]*Device // by instance name, then rank
	cards map[string][]*card   // by instance name, then node
	order []*Device
}

const fabricKey = "btl/extoll/simnic"

// FabricOf returns the fabric of the job s schedules.
func FabricOf(s *sim.Sched) *Fabric {
	return s.Value(fabricKey, func() any {
		return &Fabric{s: s, devs: map[string][]*Device{}, cards: map[string][]*card{},
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
	cards := f.cards[cfg.Name]
	for len(cards) <= node {
		cards = append(cards, nil)
	}
	if cards[node] == nil {
		cards[node] = newCard(s, f.model(node, cfg.Name))
	}
	f.cards[cfg.Name] = cards
	c := func(n string) *core.Counter { return cfg.Metrics.Counter(core.MetricName(cfg.Prefix, n)) }
	d := &Device{
		f: f, s: s, cfg: cfg, node: node, card: cards[node], port: &cards[node].port, peers: devs,
		regions: map[uint64]*region{}, out: make([]int32, cfg.Size),
		blocked: c("velo_blocked"), blockedNS: c("velo_blocked_ns"), stalls: c("velo_stalls"),
	}
	d.st.Mailbox = int64(cfg.Slots) * nic.SlotSize
	l := d.port.Link
	d.txLimit = txDepth * max(l.Gap, l.Wire(nic.SlotSize))
	devs[cfg.Rank] = d
	f.order = append(f.order, d)
	return d, nil
}

// card is a node's NIC: its port, and the VELO packets on their way to
// it. A port's arrivals are first in, first out (sim.Port.Send returns
// non-decreasing times), so the packets wait in a queue in the order they
// were sent and one event at a time, for the head, stands for all of
// them: the scheduler's heap holds a card, not every packet in flight.
type card struct {
	s       *sim.Sched
	port    sim.Port
	q       []arrival // a ring: q[head], … n of them
	head, n int
	armed   bool // an event for the head is scheduled
	deliver func()
}

// arrival is a VELO packet on the wire.
type arrival struct {
	t    time.Duration
	to   *Device
	src  int
	slot nic.Slot
}

func newCard(s *sim.Sched, l sim.Link) *card {
	c := &card{s: s, port: sim.Port{Link: l}}
	c.deliver = c.land
	return c
}

// push puts a packet on the wire to dst's card.
func (c *card) push(t time.Duration, to *Device, src int, slot *nic.Slot) {
	if c.n == len(c.q) {
		q := make([]arrival, max(16, 2*len(c.q)))
		for i := range c.n {
			q[i] = c.q[(c.head+i)%len(c.q)]
		}
		c.q, c.head = q, 0
	}
	a := &c.q[(c.head+c.n)%len(c.q)]
	a.t, a.to, a.src, a.slot = t, to, src, *slot
	c.n++
	if !c.armed {
		c.armed = true
		c.s.At(t, c.deliver)
	}
}

// land delivers the packets due now, in order.
func (c *card) land() {
	now := c.s.Now()
	for c.n > 0 && c.q[c.head].t <= now {
		a := &c.q[c.head]
		a.to.land(a.src, &a.slot)
		a.to = nil
		c.head = (c.head + 1) % len(c.q)
		c.n--
	}
	if c.n > 0 {
		c.s.At(c.q[c.head].t, c.deliver)
		return
	}
	c.armed = false
}
