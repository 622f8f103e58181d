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

// maxPiggyback is the most credits two bytes carry.
const maxPiggyback = 1<<16 - 1

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
	policy     core.FlowControl
	setup      core.FlowSetup
	credits    bool // any credit scheme
	dynamic    bool
	piggyback  bool
	k          int // credit slots per peer
	static     int // the least quota a sender has (its static slots)
	initial    int // credits a sender starts with
	fixedT     int // static scheme: the threshold
	maxQuota   int
	dataRegion int
	available  int // free data slots (the available slots counter)
	reserve    int // slots owed to senders below their static slots
	unassigned int // data slots in nobody's intended quota
	threshold  func(quota, creditSlots int) int
	unchecked  bool
	// testThreshold: a test replaced Equation 1
	testThreshold bool

	tx    []txState
	rx    []rxState
	fifo  []int32 // thresholds, k+1 per sender
	guard []int64 // credits granted before each of the last k credit packets, per sender

	backlogCap int
	events     []core.FlowEvent
	decisions  []core.FlowDecision
	lastTick   time.Duration
	lastSample time.Duration // when the per-peer gauges were last set
	polling    bool
	observing  bool
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
	e := &Engine{
		dev: dev, rank: cfg.Rank, size: cfg.Size, clock: cfg.Clock, log: cfg.Log,
		policy: cfg.Policy, piggyback: cfg.Piggyback, backlogCap: cfg.Backlog,
		threshold: cfg.threshold, unchecked: cfg.unchecked,
		tx: make([]txState, cfg.Size),
	}
	if e.threshold == nil {
		e.threshold = Threshold
	} else {
		e.testThreshold = true
	}
	e.m.init(cfg.Metrics, cfg.Prefix, cfg.Size)
	if e.policy != nil {
		s, err := e.policy.Setup(core.FlowInfo{Transport: "extoll", Peers: cfg.Size, BufferSize: nic.SlotSize, Buffers: cfg.Slots})
		if err != nil {
			return nil, fmt.Errorf("velo: flow-control policy: %w", err)
		}
		e.setup = s
	}
	scheme := cfg.Metrics.Gauge(core.MetricName(cfg.Prefix, "fc", "scheme"))
	switch e.setup.Scheme {
	case core.FlowNone:
		scheme.Set(SchemeNone)
		return e, nil
	case core.FlowCredits:
	default:
		return nil, fmt.Errorf("velo: flow-control scheme %d is not one EXTOLL runs", e.setup.Scheme)
	}
	if err := e.layout(cfg.Slots); err != nil {
		return nil, err
	}
	e.events = make([]core.FlowEvent, 0, 64)
	e.decisions = make([]core.FlowDecision, 0, 64)
	if e.dynamic {
		scheme.Set(SchemeDynamic)
	} else {
		scheme.Set(SchemeStatic)
	}
	return e, nil
}

// Values of the <prefix>.fc.scheme gauge.
const (
	SchemeNone    = 0
	SchemeStatic  = 1
	SchemeDynamic = 2
)

// layout splits the mailbox (§5.2, §6.3) and initialises both sides.
func (e *Engine) layout(slots int) error {
	n, s := e.size, e.setup
	e.credits, e.dynamic, e.k = true, s.Dynamic, s.CreditSlots
	if e.k < 1 {
		return fmt.Errorf("velo: the policy gave %d credit slots per peer; EXTOLL credits need at least 1 (seed 003 Eq. 2)", e.k)
	}
	creditRegion := e.k * n
	e.dataRegion = slots - creditRegion
	// Equation 2: data region >= credit region >= 1 slot per process.
	if e.dataRegion < creditRegion {
		return fmt.Errorf("velo: a %d-slot mailbox for %d peers leaves a data region of %d slots, smaller than the credit region of %d (%d credit slots per peer): seed 003 Eq. 2 needs data >= credit; use at least %d slots",
			slots, n, e.dataRegion, creditRegion, e.k, 2*creditRegion)
	}
	quota := s.InitialPosted
	if quota <= 0 {
		quota = e.dataRegion / n
	}
	if quota*n > e.dataRegion {
		return fmt.Errorf("velo: a quota of %d slots for %d senders exceeds the %d-slot data region", quota, n, e.dataRegion)
	}
	e.maxQuota = s.MaxPosted
	if e.maxQuota <= 0 || e.maxQuota > e.dataRegion {
		e.maxQuota = e.dataRegion
	}
	if e.dynamic {
		e.static, e.initial = e.k, e.k
		quota = max(min(quota, e.maxQuota), e.static)
	} else {
		e.static, e.initial = quota, quota
		e.fixedT = s.CreditThreshold
		if e.fixedT <= 0 || e.testThreshold {
			e.fixedT = e.threshold(quota, e.k)
		}
		if !e.unchecked && (e.fixedT < 1 || e.fixedT > quota) {
			// A threshold above the quota is never reached (seed 003 Table 1,
			// formula (a)): clamp it.
			e.log.Warn().Int("threshold", e.fixedT).Int("quota", quota).Msg("velo: threshold out of [1, quota]; clamped")
			e.m.rejected.Inc()
			e.fixedT = min(max(e.fixedT, 1), quota)
		}
	}
	e.available = e.dataRegion - n*e.initial
	e.unassigned = e.dataRegion - n*quota
	e.rx = make([]rxState, n)
	e.fifo = make([]int32, n*(e.k+1))
	e.guard = make([]int64, n*e.k)
	first := int32(1)
	if !e.dynamic {
		first = int32(e.fixedT)
	}
	for i := range e.fifo {
		e.fifo[i] = first
	}
	for i := range e.rx {
		e.rx[i] = rxState{intended: int32(quota), current: int32(e.initial)}
		e.tx[i].credits = int32(e.initial)
	}
	return nil
}

// Layout describes the flow-control parameters every rank must share: a
// sender's initial credits and the receiver's thresholds are computed from
// them on both sides.
func (e *Engine) Layout() string {
	switch {
	case !e.credits:
		return "none"
	case e.dynamic:
		return fmt.Sprintf("dynamic k=%d static=%d data=%d", e.k, e.static, e.dataRegion)
	}
	return fmt.Sprintf("static k=%d quota=%d threshold=%d", e.k, e.static, e.fixedT)
}

// Scheme is the flow-control scheme in force.
func (e *Engine) Scheme() core.FlowScheme { return e.setup.Scheme }

// Dynamic reports whether the dynamic scheme runs.
func (e *Engine) Dynamic() bool { return e.dynamic }

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
	t := &e.tx[dst]
	if t.failed != nil {
		return t.failed
	}
	if !e.credits {
		e.m.sends.Inc()
		_, err := e.dev.Send(dst, pkts)
		if err != nil {
			t.failed = err
		}
		return err
	}
	now := 0
	if t.qlen == 0 && !t.wantReq && !t.wantResp {
		now = min(int(t.credits), len(pkts))
	}
	rest := len(pkts) - now
	if rest > e.backlogCap-t.qlen {
		return fmt.Errorf("velo: send %d packets to rank %d: %d wait for credits already: %w", len(pkts), dst, t.qlen, core.ErrNoResources)
	}
	e.m.sends.Inc()
	if now > 0 {
		t.credits -= int32(now)
		if err := e.emit(dst, pkts[:now]); err != nil {
			return err
		}
	}
	if rest > 0 {
		e.m.delayed.Inc()
		e.enqueue(dst, pkts[now:])
	}
	return nil
}

// emit hands data packets to the device, piggybacking credits on those
// with room.
func (e *Engine) emit(dst int, pkts []nic.Slot) error {
	if e.piggyback {
		for i := range pkts {
			if pkts[i].Len() <= PiggybackRoom {
				e.attach(dst, &pkts[i])
			} else {
				pkts[i].SetSpare(false)
			}
		}
	}
	if _, err := e.dev.Send(dst, pkts); err != nil {
		e.fail(dst, err)
		return err
	}
	return nil
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

func (e *Engine) enqueue(dst int, pkts []nic.Slot) {
	t := &e.tx[dst]
	if t.q == nil {
		t.q = make([]nic.Slot, e.backlogCap)
	}
	if t.qlen == 0 {
		t.since = e.clock.Now()
	}
	for i := range pkts {
		t.q[(t.qhead+t.qlen)%len(t.q)] = pkts[i]
		t.qlen++
	}
	e.m.backlog.Add(int64(len(pkts)))
}

// flush sends what waits for dst while credits last: a compulsory request
// first, then a compulsory response, then the backlog (§6.5.4).
func (e *Engine) flush(dst int) {
	t := &e.tx[dst]
	for t.credits > 0 && t.failed == nil {
		switch {
		case t.wantReq:
			t.wantReq = false
			t.credits--
			e.control(dst, TagRequest, 0)
			e.m.requests.Inc()
		case t.wantResp:
			// Return everything above the static slots; the response
			// itself takes one more credit (§6.5.4).
			t.wantResp = false
			back := max(t.credits-int32(e.static), 0)
			t.credits -= back + 1
			e.control(dst, TagResponse, back)
			e.m.responsesSent.Inc()
		case t.qlen > 0:
			n := min(int(t.credits), t.qlen, len(t.q)-t.qhead)
			t.credits -= int32(n)
			run := t.q[t.qhead : t.qhead+n]
			t.qhead = (t.qhead + n) % len(t.q)
			t.qlen -= n
			e.m.backlog.Add(-int64(n))
			if t.qlen == 0 {
				e.m.waitNS.Add(int64(e.clock.Now() - t.since))
			}
			if e.emit(dst, run) != nil {
				return
			}
		default:
			return
		}
	}
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
		if !e.credits {
			if tag >= TagReserved {
				e.dev.Release()
				e.bad(src, fmt.Sprintf("flow-control packet (tag %d) but flow control is off", tag))
				continue
			}
			rcv.Packet(src, tag, s.Payload())
			e.dev.Release()
			continue
		}
		switch tag {
		case TagCredit:
			v := int32(binary.LittleEndian.Uint32(s.Area()))
			e.dev.Release()
			e.credit(src, v)
		case TagRequest:
			e.dev.Release()
			e.retrieved(src)
			e.tx[src].wantResp = true
			e.m.requestsReceived.Inc()
			e.flush(src)
		case TagResponse:
			v := int32(binary.LittleEndian.Uint32(s.Area()))
			e.dev.Release()
			e.retrieved(src)
			e.response(src, v)
		default:
			pig := int32(0)
			if s.Spare() {
				pig = int32(binary.LittleEndian.Uint16(s[nic.SlotSize-2:]))
			}
			rcv.Packet(src, tag, s.Payload())
			e.dev.Release()
			e.retrieved(src)
			if pig > 0 {
				e.credit(src, pig)
			}
		}
	}
	if len(e.events) > 0 {
		e.observe()
	}
	return n
}

func (e *Engine) bad(src int, what string) {
	e.m.bad.Inc()
	if src >= 0 && src < e.size {
		e.fail(src, fmt.Errorf("velo: bad %s from rank %d: %w", what, src, core.ErrBadFrame))
		if e.credits {
			e.retrieved(src) // it took a slot all the same
		}
	}
}

// credit is the sender side receiving credits (packet or piggyback).
func (e *Engine) credit(src int, v int32) {
	if v <= 0 {
		return
	}
	e.tx[src].credits += v
	e.flush(src)
}

// retrieved is the slot management module (§6.5.1) followed by the regular
// way of the activity control module (§6.5.2): a data packet or a
// compulsory request or response from src has left the mailbox.
func (e *Engine) retrieved(src int) {
	r := &e.rx[src]
	r.taken++
	e.available++
	e.setCurrent(r, r.current-1)
	r.retrieved++
	if r.retrieved >= e.fifo[e.headIdx(src)] {
		e.reach(src, false)
	}
	if r.owed > 0 {
		e.sendCredit(src)
	}
}

func (e *Engine) headIdx(src int) int { return src*(e.k+1) + int(e.rx[src].head) }

// reach runs when src's current threshold has been reached: the regular
// way (retrieved == head) or the piggyback way (retrieved + piggybacked >=
// head, §6.6.1). It pops the head, pushes the next threshold and grants
// the credits due; the caller sends them.
func (e *Engine) reach(src int, viaPiggyback bool) {
	r := &e.rx[src]
	hi := e.headIdx(src)
	head := e.fifo[hi]
	// Pop the head; the pushed threshold takes its place at the tail,
	// which in a ring of k+1 is the same cell.
	r.head = int32((int(r.head) + 1) % (e.k + 1))
	if r.blocked {
		// The blocked workflow (§6.5.2): credits are being taken back; give
		// one only to a sender below its static slots.
		e.fifo[hi] = 1
		r.retrieved, r.piggy = 0, 0
		if r.current < int32(e.static) {
			e.grant(src, 1)
		}
		e.live(src)
		return
	}
	r.pops++
	if e.dynamic && r.pops%uint32(e.k+1) == 0 {
		e.m.monitors.Inc()
		e.event(core.FlowMonitor, src, r.intended, int64(r.current))
	}
	next := int32(e.fixedT)
	if e.dynamic {
		next = int32(e.threshold(int(r.intended), e.k))
	}
	e.fifo[hi] = next
	// Credits due for this round: the new threshold, plus any overshoot of
	// the head, minus what was already piggybacked (adjustment by deficit).
	due := next + r.retrieved - head
	r.retrieved, r.piggy = 0, 0
	if due < 0 {
		// Adjustment by excess (§6.6.2): more went back by piggyback than
		// the new threshold; the next threshold grows by the difference.
		e.fifo[e.headIdx(src)] -= due
		due = 0
	}
	if viaPiggyback {
		e.m.piggyReach.Inc()
	}
	e.grant(src, due)
	e.live(src)
}

// grant takes up to n credits for src out of the free data slots, never
// into another sender's reserve, and returns how many.
func (e *Engine) grant(src int, n int32) int32 {
	if n <= 0 {
		return 0
	}
	r := &e.rx[src]
	own := max(int32(e.static)-r.current, 0)
	free := int32(e.available - (e.reserve - int(own)))
	n = min(n, free)
	if n <= 0 {
		e.m.starved.Inc()
		return 0
	}
	e.available -= int(n)
	e.setCurrent(r, r.current+n)
	r.owed += n
	return n
}

// setCurrent updates a sender's current credits and the reserve owed to
// senders below their static slots.
func (e *Engine) setCurrent(r *rxState, v int32) {
	st := int32(e.static)
	e.reserve += int(max(st-v, 0) - max(st-r.current, 0))
	r.current = v
}

// live keeps src's head threshold within reach: the sender can send at most
// its current credits more before the receiver must have answered.
func (e *Engine) live(src int) {
	if e.unchecked {
		return
	}
	r := &e.rx[src]
	hi := e.headIdx(src)
	if e.fifo[hi]-r.retrieved <= r.current {
		return
	}
	e.m.headClamps.Inc()
	if r.current > 0 {
		e.fifo[hi] = r.retrieved + r.current
		return
	}
	// Nothing held, nothing in flight: no threshold can be reached. Reach
	// it now, which grants from the sender's reserve.
	e.fifo[hi] = r.retrieved
	e.reach(src, false)
}

// sendCredit sends src the credits owed to it in a credit packet, if the
// credit region is sure to have room for it.
func (e *Engine) sendCredit(src int) {
	r := &e.rx[src]
	c := r.cps + 1
	g := &e.guard[src*e.k+int((c-1)%int64(e.k))]
	if c > int64(e.k) && !e.unchecked && r.taken <= int64(e.initial)+*g {
		// The sender may not have read credit packet c-k yet: sending
		// would put k+1 of ours in its credit region. Keep owing.
		if !r.deferred {
			r.deferred = true
			e.m.deferred.Inc()
		}
		return
	}
	r.deferred = false
	*g = r.granted
	r.cps = c
	v := r.owed
	r.owed = 0
	r.granted += int64(v)
	e.m.creditPackets.Inc()
	e.m.creditsSent.Add(int64(v))
	e.control(src, TagCredit, v)
}

// attach piggybacks owed credits on a data packet to dst (§5.4, §6.6).
func (e *Engine) attach(dst int, s *nic.Slot) {
	s.SetSpare(false)
	r := &e.rx[dst]
	if !r.blocked && r.retrieved > 0 {
		if r.retrieved+r.piggy >= e.fifo[e.headIdx(dst)] {
			e.reach(dst, true)
		} else {
			g := e.grant(dst, r.retrieved)
			r.retrieved -= g
			r.piggy += g
		}
	}
	if r.owed <= 0 {
		return
	}
	v := min(r.owed, maxPiggyback)
	r.owed -= v
	r.granted += int64(v)
	s.SetSpare(true)
	binary.LittleEndian.PutUint16(s[nic.SlotSize-2:], uint16(v))
	e.m.piggyPackets.Inc()
	e.m.piggyCredits.Add(int64(v))
}

// response handles a compulsory credit return response (§6.5.4).
func (e *Engine) response(src int, v int32) {
	r := &e.rx[src]
	v = min(max(v, 0), r.current)
	r.taken += int64(v)
	e.available += int(v)
	e.setCurrent(r, r.current-v)
	r.blocked = false
	e.m.responses.Inc()
	e.m.reclaimed.Add(int64(v))
	e.live(src)
	if r.owed > 0 {
		e.sendCredit(src)
	}
}

func (e *Engine) event(kind core.FlowEventKind, peer int, posted int32, value int64) {
	if e.policy == nil {
		return
	}
	e.events = append(e.events, core.FlowEvent{Kind: kind, Peer: int32(peer), Posted: posted, Value: value, At: e.clock.Now()})
	if len(e.events) >= 64 && !e.observing {
		e.observe()
	}
}

// observe hands the batch of events to the policy and applies what it
// proposes. Events raised while applying go to the next batch.
func (e *Engine) observe() {
	e.observing = true
	out := e.policy.Observe(e.events, e.decisions[:0])
	e.events = e.events[:0]
	for _, d := range out {
		e.apply(d)
	}
	e.decisions = out[:0]
	e.lastTick = e.clock.Now()
	e.observing = false
}

// sampleInterval is how often Tick refreshes the per-peer credit gauges.
const sampleInterval = 100 * time.Microsecond

// Tick lets a policy whose decisions arrive late (a plugin) deliver them:
// the BTL calls it from Progress.
func (e *Engine) Tick() {
	if e.policy == nil || !e.credits {
		return
	}
	now := e.clock.Now()
	if now-e.lastTick >= core.PolicyPollInterval {
		e.lastTick = now
		e.observe()
	}
	if now-e.lastSample >= sampleInterval {
		e.lastSample = now
		e.m.sample(e)
	}
}

// apply checks a policy decision against the engine's state and applies
// what holds (DESIGN.md: policy proposes, mechanism disposes).
func (e *Engine) apply(d core.FlowDecision) {
	p := int(d.Peer)
	if p < 0 || p >= e.size {
		e.m.rejected.Inc()
		return
	}
	switch {
	case d.Kind == core.FlowSetPosted && e.dynamic:
		e.setQuota(p, d.Value)
	case d.Kind == core.FlowReclaim && e.dynamic:
		e.reclaim(p)
	case d.Kind == core.FlowSetThreshold && !e.dynamic:
		v := int(d.Value)
		if v < 1 || v > e.initial {
			e.m.rejected.Inc()
			return
		}
		e.fixedT = v
	default:
		e.m.rejected.Inc()
	}
}

// setQuota sets a sender's intended quota: never below its static slots,
// never above the cap, and growing only out of unassigned data slots.
func (e *Engine) setQuota(p int, v int64) {
	r := &e.rx[p]
	want := min(max(v, int64(e.static)), int64(e.maxQuota))
	cur := int64(r.intended)
	switch {
	case want < cur:
		e.unassigned += int(cur - want)
		e.m.steals.Inc()
		e.m.stolen.Add(cur - want)
	case want > cur:
		want = cur + min(want-cur, int64(e.unassigned))
		e.unassigned -= int(want - cur)
	}
	r.intended = int32(want)
	if want != v {
		e.m.clamped.Inc()
		e.event(core.FlowQuota, p, r.intended, int64(r.current))
	}
}

// reclaim sends a compulsory credit return request to a sender holding
// more than its intended quota (§6.5, Figure 13).
func (e *Engine) reclaim(p int) {
	r := &e.rx[p]
	if r.blocked || r.current <= r.intended {
		e.m.reclaimSkipped.Inc()
		return
	}
	r.blocked = true
	e.tx[p].wantReq = true
	e.flush(p)
}

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
func (e *Engine) Quota(src int) (intended, current int) {
	if !e.credits {
		return 0, 0
	}
	return int(e.rx[src].intended), int(e.rx[src].current)
}

// Free returns the free data slots and the unassigned quota.
func (e *Engine) Free() (available, unassigned int) { return e.available, e.unassigned }

// Blocked reports whether a compulsory request to src is outstanding.
func (e *Engine) Blocked(src int) bool { return e.credits && e.rx[src].blocked }

// StaticSlots is the least quota a sender keeps.
func (e *Engine) StaticSlots() int { return e.static }

// CreditSlots is the credit slots per peer (0 without credits).
func (e *Engine) CreditSlots() int { return e.k }

// DataRegion is the size of the data region (0 without credits).
func (e *Engine) DataRegion() int { return e.dataRegion }

// StateBytes is the memory of the flow-control structures kept per
// receiver for its n senders (the quantity of seed 003 Eq. 7), excluding
// the mailbox and backlog buffers.
func (e *Engine) StateBytes() int {
	if !e.credits {
		return 0
	}
	return stateBytes(e.size, e.k)
}

// Describe reports the flow-control state toward and from peer, for
// diagnostics.
func (e *Engine) Describe(peer int) string {
	t := &e.tx[peer]
	s := fmt.Sprintf("to %d: credits %d backlog %d request %v response %v", peer, t.credits, t.qlen, t.wantReq, t.wantResp)
	if !e.credits {
		return s
	}
	r := &e.rx[peer]
	return s + fmt.Sprintf("; from %d: thresholds %v head %d quota %d current %d retrieved %d piggybacked %d owed %d blocked %v; pool: free %d reserved %d",
		peer, e.fifo[peer*(e.k+1):(peer+1)*(e.k+1)], r.head, r.intended, r.current, r.retrieved, r.piggy, r.owed, r.blocked, e.available, e.reserve)
}
