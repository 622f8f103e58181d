package velo

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// Tags the flow control keeps for its control packets; upper layers use
// tags below TagReserved.
const (
	TagReserved uint8 = 29
	// TagResponse is a compulsory credit return response (§6.1).
	TagResponse uint8 = 29
	// TagRequest is a compulsory credit return request (§6.1).
	TagRequest uint8 = 30
	// TagCredit is a credit packet (§5.1).
	TagCredit uint8 = 31
)

// PiggybackRoom is the largest payload of a packet that can carry
// piggybacked credits in the last two bytes of its slot (§5.4).
const PiggybackRoom = nic.MaxPayload - 2

// Threshold is Equation 1 of seed 003: the number of freed slots a receiver
// accumulates before it returns credits, such that the sender's credit
// region can always hold the credit packet.
func Threshold(quota, creditSlots int) int { return quota/(creditSlots+1) + 1 }

// Receiver takes data packets out of Poll.
type Receiver interface {
	// Packet is called for each data packet in arrival order. payload is
	// valid only during the call; Packet may call Send.
	Packet(src int, tag uint8, payload []byte)
}

// Config configures an Engine.
type Config struct {
	Rank, Size int
	// Slots is the size of this process's mailbox; every process of the
	// job must use the same size and policy.
	Slots int
	// Policy is the flow-control policy; nil means none.
	Policy core.FlowControl
	// Piggyback enables piggybacked credits (§5.4).
	Piggyback bool
	// Backlog bounds the packets waiting for credits per destination
	// (default 256); a Send that does not fit fails with ErrNoResources.
	Backlog int
	Clock   core.Clock
	Metrics *core.Metrics
	// Prefix names the metrics ("extoll" -> "extoll.fc.credit_packets").
	Prefix string
	Log    zerolog.Logger

	// For tests of the paper's counter-examples: a threshold formula other
	// than Equation 1, and turning off the mechanism's checks.
	threshold func(quota, creditSlots int) int
	unchecked bool
}

// Engine is libvelo for one process: send and poll VELO packets under flow
// control.
type Engine struct {
	dev        nic.VELO
	rank, size int
	clock      core.Clock
	log        zerolog.Logger
	setup      core.FlowSetup
	// fc is the flow control in force, chosen once at New (scheme.go).
	fc scheme
	tx []txState

	lastSample time.Duration // when the per-peer gauges were last set
	polling    bool
	ctl        [1]nic.Slot
	errs       []PeerError

	m metrics
}

// txState is this process as a sender to one destination.
type txState struct {
	credits  int32
	wantReq  bool // a compulsory request waits for a credit
	wantResp bool // a compulsory response waits for a credit
	q        []nic.Slot
	qhead    int
	qlen     int
	since    time.Duration
	failed   error
}

// PeerError is a failure the engine met while sending on its own (a credit
// packet, a flushed backlog) or a bad packet from a peer.
type PeerError struct {
	Rank int
	Err  error
}

// New builds an engine over dev. It asks the policy for its parameters and
// checks them against Equation 2.
func New(dev nic.VELO, cfg Config) (*Engine, error) {
	if cfg.Size <= 0 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("velo: rank %d of %d", cfg.Rank, cfg.Size)
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock
	}
	if cfg.Metrics == nil {
		cfg.Metrics = core.NewMetrics()
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 256
	}
	e := &Engine{dev: dev, rank: cfg.Rank, size: cfg.Size, clock: cfg.Clock, log: cfg.Log, tx: make([]txState, cfg.Size)}
	e.m.init(cfg.Metrics, cfg.Prefix, cfg.Size)
	if cfg.Policy != nil {
		s, err := cfg.Policy.Setup(core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: cfg.Size, Senders: cfg.Size, BufferSize: nic.SlotSize, Buffers: cfg.Slots})
		if err != nil {
			return nil, fmt.Errorf("velo: flow-control policy: %w", err)
		}
		e.setup = s
	}
	fc, err := e.newScheme(cfg)
	if err != nil {
		return nil, err
	}
	e.fc = fc
	cfg.Metrics.Gauge(core.MetricName(cfg.Prefix, "fc", "scheme")).Set(fc.kind())
	return e, nil
}

// Values of the <prefix>.fc.scheme gauge.
const (
	SchemeNone    = 0
	SchemeStatic  = 1
	SchemeDynamic = 2
)

// Layout describes the flow-control parameters every rank must share: a
// sender's initial credits and the receiver's thresholds are computed from
// them on both sides.
func (e *Engine) Layout() string { return e.fc.layout() }

// Scheme is the flow-control scheme in force.
func (e *Engine) Scheme() core.FlowScheme { return e.setup.Scheme }

// Dynamic reports whether the dynamic scheme runs.
func (e *Engine) Dynamic() bool { return e.fc.kind() == SchemeDynamic }

// Send sends a train of packets to dst, in order: as many as the credits
// allow at once, the rest when credits come back. It fails with
// ErrNoResources, sending nothing, when the backlog cannot hold the rest.
// The engine may write into pkts. Without flow control the packets go
// straight to the device, which blocks while dst's mailbox is full.
func (e *Engine) Send(dst int, pkts []nic.Slot) error {
	if dst < 0 || dst >= e.size {
		return fmt.Errorf("velo: send to rank %d of %d: %w", dst, e.size, core.ErrUnreachable)
	}
	if len(pkts) == 0 {
		return nil
	}
	if err := e.tx[dst].failed; err != nil {
		return err
	}
	return e.fc.send(dst, pkts)
}

func (e *Engine) fail(dst int, err error) {
	t := &e.tx[dst]
	if t.failed == nil {
		t.failed = err
		e.errs = append(e.errs, PeerError{Rank: dst, Err: err})
	}
}

// Forget drops what waits for dst and fails later sends to it with err:
// the layer above has given the peer up.
func (e *Engine) Forget(dst int, err error) {
	t := &e.tx[dst]
	if t.failed == nil {
		t.failed = err
	}
	e.m.backlog.Add(-int64(t.qlen))
	t.qlen, t.qhead, t.wantReq, t.wantResp = 0, 0, false, false
}

// Failed returns, once each, the peers the engine found failed.
func (e *Engine) Failed() (PeerError, bool) {
	if len(e.errs) == 0 {
		return PeerError{}, false
	}
	p := e.errs[0]
	e.errs = e.errs[1:]
	return p, true
}

// control sends a control packet carrying value.
func (e *Engine) control(dst int, tag uint8, value int32) {
	s := &e.ctl[0]
	s.SetHeader(4, tag, false)
	binary.LittleEndian.PutUint32(s.Area(), uint32(value))
	if _, err := e.dev.Send(dst, e.ctl[:]); err != nil {
		e.fail(dst, err)
	}
}

// Poll processes up to max packets from the mailbox, handing data packets
// to rcv, and returns how many it took. Handlers run before the packet's
// slot is counted free, so a slot is never granted while still in use.
func (e *Engine) Poll(max int, rcv Receiver) int {
	if e.polling {
		return 0 // a handler called back into Poll
	}
	e.polling = true
	defer func() { e.polling = false }()
	n := 0
	for n < max {
		s := e.dev.Poll()
		if s == nil {
			break
		}
		n++
		src, tag, length := s.Src(), s.Tag(), s.Len()
		if src >= e.size || length > nic.MaxPayload || (s.Spare() && length > PiggybackRoom) {
			e.dev.Release()
			e.bad(src, fmt.Sprintf("packet with length %d, spare %v", length, s.Spare()))
			continue
		}
		e.fc.packet(s, src, tag, rcv)
	}
	e.fc.polled()
	return n
}

func (e *Engine) bad(src int, what string) {
	e.m.bad.Inc()
	if src >= 0 && src < e.size {
		e.fail(src, fmt.Errorf("velo: bad %s from rank %d: %w", what, src, core.ErrBadFrame))
		e.fc.dropped(src) // it took a slot all the same
	}
}

// sampleInterval is how often Tick refreshes the per-peer credit gauges.
const sampleInterval = 100 * time.Microsecond

// Tick lets a policy whose decisions arrive late (a plugin) deliver them:
// the BTL calls it from Progress.
func (e *Engine) Tick() { e.fc.tick(e.clock.Now()) }

// Credits is how many packets this process may send to dst now.
func (e *Engine) Credits(dst int) int { return int(e.tx[dst].credits) }

// Pending is how many packets, over all destinations, wait for credits
// (compulsory requests and responses included).
func (e *Engine) Pending() int {
	n := 0
	for i := range e.tx {
		t := &e.tx[i]
		if t.failed != nil {
			continue
		}
		n += t.qlen
		if t.wantReq {
			n++
		}
		if t.wantResp {
			n++
		}
	}
	return n
}

// Backlog is how many packets to dst wait for credits.
func (e *Engine) Backlog(dst int) int { return e.tx[dst].qlen }

// Quota returns a sender's intended quota and current credits as this
// receiver sees them (0, 0 without credits).
func (e *Engine) Quota(src int) (intended, current int) { return e.fc.quota(src) }

// Free returns the free data slots and the unassigned quota.
func (e *Engine) Free() (available, unassigned int) { return e.fc.free() }

// Blocked reports whether a compulsory request to src is outstanding.
func (e *Engine) Blocked(src int) bool { return e.fc.blocked(src) }

// StaticSlots is the least quota a sender keeps.
func (e *Engine) StaticSlots() int { return e.fc.slots().static }

// CreditSlots is the credit slots per peer (0 without credits).
func (e *Engine) CreditSlots() int { return e.fc.slots().k }

// DataRegion is the size of the data region (0 without credits).
func (e *Engine) DataRegion() int { return e.fc.slots().data }

// StateBytes is the memory of the flow-control structures kept per
// receiver for its n senders (the quantity of seed 003 Eq. 7), excluding
// the mailbox and backlog buffers.
func (e *Engine) StateBytes() int {
	if k := e.fc.slots().k; k > 0 {
		return stateBytes(e.size, k)
	}
	return 0
}

// Describe reports the flow-control state toward and from peer, for
// diagnostics.
func (e *Engine) Describe(peer int) string {
	t := &e.tx[peer]
	return fmt.Sprintf("to %d: credits %d backlog %d request %v response %v", peer, t.credits, t.qlen, t.wantReq, t.wantResp) + e.fc.describe(peer)
}
