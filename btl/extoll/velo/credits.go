package velo

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
)

// credits is the credit flow control of seed 003 §5–6, both sides: the
// sender's credit counters and backlog (backlog.go), the receiver's
// threshold FIFOs and credit return (receiver.go), piggybacking
// (piggyback.go). Its region — static (§5) or dynamic (§6) — decides how
// the data region is handed out; everything else is common.
type credits struct {
	e      *Engine
	region region
	split
	piggyback  bool
	backlogCap int
	maxQuota   int
	available  int // free data slots (the available slots counter)
	reserve    int // slots owed to senders below their static slots
	unassigned int // data slots in nobody's intended quota
	threshold  func(quota, creditSlots int) int
	unchecked  bool

	rx    []rxState
	fifo  []int32 // thresholds, k+1 per sender
	guard []int64 // credits granted before each of the last k credit packets, per sender

	policy policy.Driver[core.FlowEvent, core.FlowDecision]
}

// rxState is one sender as this receiver sees it.
type rxState struct {
	head      int32 // index of the current threshold in the FIFO
	intended  int32 // intended credit quota
	current   int32 // credits granted: held by the sender or in flight
	retrieved int32 // retrieved packets counter (not yet returned)
	piggy     int32 // piggybacked credits counter
	owed      int32 // granted, not yet sent
	blocked   bool
	deferred  bool
	pops      uint32
	granted   int64 // credits sent to the sender, all time
	taken     int64 // packets retrieved plus credits returned, all time
	cps       int64 // credit packets sent
}

// region is how a credit scheme hands out the data region.
type region interface {
	// init sets the static and initial slots of c from share, a sender's
	// quota at start, and returns its intended quota and the threshold
	// the FIFOs start with.
	init(c *credits, share int) (intended int, first int32)
	// next is the threshold pushed when src's head has been popped for
	// the r.pops-th time.
	next(c *credits, src int, r *rxState) int32
	// apply checks and applies a policy decision about a valid peer.
	apply(c *credits, d core.FlowDecision) policy.Verdict
	kind() int64
	layout(c *credits) string
}

// newCredits splits the mailbox (§5.2, §6.3) by the policy's setup and
// initialises both sides.
func newCredits(e *Engine, cfg Config) (*credits, error) {
	n, s := e.size, e.setup
	c := &credits{e: e, piggyback: cfg.Piggyback, backlogCap: cfg.Backlog, threshold: cfg.threshold, unchecked: cfg.unchecked}
	if s.DynamicRegion {
		c.region = &dynamicRegion{}
	} else {
		c.region = &staticRegion{}
	}
	c.k = s.CreditSlots
	if c.k < 1 {
		return nil, fmt.Errorf("velo: the policy gave %d credit slots per peer; EXTOLL credits need at least 1 (seed 003 Eq. 2)", c.k)
	}
	creditRegion := c.k * n
	c.data = cfg.Slots - creditRegion
	// Equation 2: data region >= credit region >= 1 slot per process.
	if c.data < creditRegion {
		return nil, fmt.Errorf("velo: a %d-slot mailbox for %d peers leaves a data region of %d slots, smaller than the credit region of %d (%d credit slots per peer): seed 003 Eq. 2 needs data >= credit; use at least %d slots",
			cfg.Slots, n, c.data, creditRegion, c.k, 2*creditRegion)
	}
	share := s.Quota
	if share <= 0 {
		share = c.data / n
	}
	if share*n > c.data {
		return nil, fmt.Errorf("velo: a quota of %d slots for %d senders exceeds the %d-slot data region", share, n, c.data)
	}
	c.maxQuota = s.MaxQuota
	if c.maxQuota <= 0 {
		c.maxQuota = share // quotas never grow
	}
	c.maxQuota = min(c.maxQuota, c.data)
	quota, first := c.region.init(c, share)
	c.available = c.data - n*c.initial
	c.unassigned = c.data - n*quota
	c.rx = make([]rxState, n)
	c.fifo = make([]int32, n*(c.k+1))
	c.guard = make([]int64, n*c.k)
	for i := range c.fifo {
		c.fifo[i] = first
	}
	for i := range c.rx {
		c.rx[i] = rxState{intended: int32(quota), current: int32(c.initial)}
		e.tx[i].credits = int32(c.initial)
	}
	c.policy.Init(policy.Config[core.FlowEvent, core.FlowDecision]{
		Policy: cfg.Policy, Apply: policy.Each(c.apply), Batch: 64, Clock: e.clock,
		Clamped: e.m.clamped, Rejected: e.m.rejected,
	})
	return c, nil
}

// packet takes one packet out of the mailbox: credits to the sender side,
// compulsory requests and responses (§6.5.4) and data to the receiver
// side, which counts the slot free after the handler has run.
func (c *credits) packet(s *nic.Slot, src int, tag uint8, rcv Receiver) {
	e := c.e
	switch tag {
	case TagCredit:
		v := int32(binary.LittleEndian.Uint32(s.Area()))
		e.dev.Release()
		c.credit(src, v)
	case TagRequest:
		e.dev.Release()
		c.retrieved(src)
		e.tx[src].wantResp = true
		e.m.requestsReceived.Inc()
		c.flush(src)
	case TagResponse:
		v := int32(binary.LittleEndian.Uint32(s.Area()))
		e.dev.Release()
		c.retrieved(src)
		c.response(src, v)
	default:
		pig := int32(0)
		if s.Spare() {
			pig = int32(binary.LittleEndian.Uint16(s[nic.SlotSize-2:]))
		}
		rcv.Packet(src, tag, s.Payload())
		e.dev.Release()
		c.retrieved(src)
		if pig > 0 {
			c.credit(src, pig)
		}
	}
}

func (c *credits) dropped(src int) { c.retrieved(src) }

// event reports something the engine saw to the policy.
func (c *credits) event(kind core.FlowEventKind, peer int, quota int32, value int64) {
	c.policy.Event(core.FlowEvent{Kind: kind, Peer: int32(peer), Quota: quota, Value: value, At: c.e.clock.Now()})
}

func (c *credits) polled() { c.policy.Flush() }

func (c *credits) tick(now time.Duration) {
	c.policy.Tick(now)
	if e := c.e; now-e.lastSample >= sampleInterval {
		e.lastSample = now
		e.m.sample(e)
	}
}

// apply checks a policy decision against the engine's state and applies
// what holds (ARCHITECTURE.md: policy proposes, mechanism disposes).
func (c *credits) apply(d core.FlowDecision) policy.Verdict {
	if d.Peer < 0 || int(d.Peer) >= c.e.size {
		return policy.Rejected
	}
	if d.Kind == core.FlowQuiet {
		// For a plugin host, which keeps the points it names from the
		// plugin; the engine reports every point all the same.
		return policy.Applied
	}
	return c.region.apply(c, d)
}

func (c *credits) kind() int64    { return c.region.kind() }
func (c *credits) layout() string { return c.region.layout(c) }
func (c *credits) slots() split   { return c.split }

func (c *credits) quota(src int) (intended, current int) {
	return int(c.rx[src].intended), int(c.rx[src].current)
}

func (c *credits) free() (available, unassigned int) { return c.available, c.unassigned }

func (c *credits) blocked(src int) bool { return c.rx[src].blocked }

func (c *credits) describe(peer int) string {
	r := &c.rx[peer]
	return fmt.Sprintf("; from %d: thresholds %v head %d quota %d current %d retrieved %d piggybacked %d owed %d blocked %v; pool: free %d reserved %d",
		peer, c.fifo[peer*(c.k+1):(peer+1)*(c.k+1)], r.head, r.intended, r.current, r.retrieved, r.piggy, r.owed, r.blocked, c.available, c.reserve)
}

// thresholdOf is Equation 1 for a quota, or the formula a test put in its
// place.
func (c *credits) thresholdOf(quota int) int {
	if c.threshold != nil {
		return c.threshold(quota, c.k)
	}
	return Threshold(quota, c.k)
}
