package plugins

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/rs/zerolog"
)

// How much the host lets pile up for a plugin. A batch in flight is one
// sent and not yet answered; further events wait in one pending batch,
// which grows (coalescing Observe calls) until the plugin catches up, and
// past maxPending events are dropped and counted rather than buffered
// without bound: a policy is control, and the mechanism will report
// again what still matters (a backlogged peer stays backlogged).
const (
	maxInflight = 64
	maxPending  = 1 << 16
	fullBatch   = 64
	// linger spaces small batches: a mechanism collects decisions only
	// every core.PolicyPollInterval anyway. While the plugin's answers
	// stay empty the spacing doubles with each, up to maxLinger: a policy
	// that only watches a steady stream (extoll_dynamic once the quotas
	// have settled: a monitoring point every few hundred messages, no
	// decision) then costs the ranks a plugin round trip every few
	// milliseconds, not every one. Each round trip wakes the plugin
	// process and two host goroutines — on 2 cores, CPU the ranks lose.
	// An answer with a decision brings the spacing back to linger.
	linger    = core.PolicyPollInterval
	maxLinger = 8 * linger
)

const (
	stateRunning int32 = iota
	stateFallback
	stateAborted
	stateClosed
)

// observer is the Observe half of every policy interface.
type observer[E, D any] interface {
	Observe(events []E, out []D) []D
}

// link is one kind's Observe stream, as the proxy needs it.
type link[E, D any] interface {
	send(seq uint64, events []E) error
	// recv appends the next decision batch to dst and returns the seq of
	// the event batch it answers.
	recv(dst []D) (ack uint64, _ []D, err error)
	closeSend()
}

// inflight is a batch sent and not yet answered.
type inflight[E any] struct {
	seq    uint64
	sent   time.Time
	events []E
}

// proxy carries one policy's events to a plugin process and its decisions
// back, without ever making the caller wait (core/policy.go): Observe
// appends events to a pending batch and takes the decisions that have
// arrived; a sender goroutine ships pending batches, a receiver goroutine
// collects answers. Both touch the caller's state only under short locks,
// and the caller touches theirs only when there is something to hand over.
//
// When the plugin fails — its stream breaks, its process exits, or a batch
// goes unanswered past the deadline — the proxy switches, once, to its
// fallback: a built-in policy set up with every Setup the plugin saw,
// which first observes the events the plugin never answered, then takes
// over. With on_failure = "abort" it reports the failure instead and
// proposes nothing more; the mechanism keeps the parameters it has.
type proxy[E, D any] struct {
	what     string // "flow_control policy \"x\" (file.hcl:3)", for logs and errors
	log      zerolog.Logger
	deadline time.Duration
	abort    bool
	link     link[E, D]
	// newFallback builds the fallback (and replays Setup into it).
	newFallback func() (observer[E, D], string, error)
	onFail      func(error) // after the switch: the owner's abort/cleanup
	// explain adds what is known of the process to a stream error (it
	// exited, with which status).
	explain func(error) error
	stats   *proxyStats

	state atomic.Int32

	// Caller to sender. The ring holds batches in flight; after a failure
	// (closed) events collect in replay for the fallback.
	mu       sync.Mutex
	pend     []E
	ring     [maxInflight]inflight[E]
	head, n  int
	free     [][]E
	replay   []E
	closed   bool
	dropped  int64
	wake     chan struct{}
	ackWake  chan struct{}
	lastSeq  uint64
	ackedSeq atomic.Uint64
	// lingering: the sender sleeps until a small batch may go. quiet: how
	// many of the plugin's last answers in a row held no decision.
	lingering atomic.Bool
	quiet     atomic.Int32
	// still are the events the plugin's latest answer stated change
	// nothing (core.FlowQuiet), while they hold: Observe drops those until
	// an event of another sort arrives. stillOps is nil for kinds without
	// such statements.
	still    []E
	stillOps *stillOps[E, D]

	// Receiver to caller.
	dmu   sync.Mutex
	dpend []D
	dn    atomic.Int64

	// Set before state becomes stateFallback; read only by the caller.
	fb          observer[E, D]
	replayReady atomic.Bool

	failOnce sync.Once
	failed   chan struct{}
	err      error

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stillOps are a kind's statements that some events would change nothing
// in its policy (core.FlowQuiet): the decisions made so far stand while
// only such events happen, so the host keeps them from the plugin — a
// settled policy then costs no round trip, however long the run.
type stillOps[E, D any] struct {
	// template gives the event a decision states changes nothing, if it
	// is such a statement.
	template func(d *D) (E, bool)
	// matches reports whether e is an event template names.
	matches func(template, e *E) bool
}

// flowStill: extoll_dynamic's settled monitoring points.
var flowStill = &stillOps[core.FlowEvent, core.FlowDecision]{
	template: func(d *core.FlowDecision) (core.FlowEvent, bool) {
		return core.FlowEvent{Kind: core.FlowMonitor, Peer: d.Peer, Quota: int32(d.Value)}, d.Kind == core.FlowQuiet
	},
	matches: func(t, e *core.FlowEvent) bool { return e.Kind == t.Kind && e.Peer == t.Peer && e.Quota == t.Quota },
}

// split moves the statements out of ds into still, keeping the order of
// the rest.
func (o *stillOps[E, D]) split(ds []D, still []E) ([]D, []E) {
	k := 0
	for i := range ds {
		if e, ok := o.template(&ds[i]); ok {
			still = append(still, e)
			continue
		}
		ds[k] = ds[i]
		k++
	}
	clear(ds[k:])
	return ds[:k], still
}

// covers reports whether one of still names e.
func (o *stillOps[E, D]) covers(still []E, e *E) bool {
	for i := range still {
		if o.matches(&still[i], e) {
			return true
		}
	}
	return false
}

// proxyStats are a plugin policy's counters.
type proxyStats struct {
	events, decisions, batches, dropped, failures *core.Counter
	// stilled counts the events kept from the plugin because it stated
	// they change nothing.
	stilled *core.Counter
}

func newProxyStats(m *core.Metrics, plugin string) *proxyStats {
	c := func(n string) *core.Counter {
		if m == nil {
			return new(core.Counter)
		}
		return m.Counter(core.MetricName("plugin", plugin, n))
	}
	return &proxyStats{events: c("events"), decisions: c("decisions"), batches: c("batches"), dropped: c("events_dropped"), failures: c("failures"), stilled: c("events_still")}
}

func newProxy[E, D any](what string, log zerolog.Logger, deadline time.Duration, abort bool, l link[E, D], stats *proxyStats) *proxy[E, D] {
	ctx, cancel := context.WithCancel(context.Background())
	return &proxy[E, D]{
		what: what, log: log, deadline: deadline, abort: abort, link: l, stats: stats,
		wake: make(chan struct{}, 1), ackWake: make(chan struct{}, 1),
		failed: make(chan struct{}), ctx: ctx, cancel: cancel,
	}
}

// run starts the sender and receiver goroutines.
func (p *proxy[E, D]) run() {
	p.wg.Add(2)
	go p.sendLoop()
	go p.recvLoop()
}

// Observe queues events for the plugin and returns the decisions that
// have arrived. It never blocks on the plugin and, once its buffers have
// grown to the traffic, never allocates. Calls must not overlap (as for
// any policy).
func (p *proxy[E, D]) Observe(events []E, out []D) []D {
	if p.dn.Load() > 0 {
		out = p.takeDecisions(out)
	}
	switch p.state.Load() {
	case stateRunning:
		if len(events) == 0 {
			return out
		}
		p.mu.Lock()
		if len(p.still) > 0 {
			events = p.unstill(events)
		}
		switch {
		case len(events) == 0:
		case p.closed:
			p.replay = append(p.replay, events...)
		case len(p.pend)+len(events) > maxPending:
			p.dropped += int64(len(events))
		default:
			p.pend = append(p.pend, events...)
		}
		// Wake the sender only when it will send (see sendLoop); else the
		// answer in flight wakes it. A wake-up is a futex call and a
		// thread the ranks' cores could have used.
		send := len(events) > 0 && (len(p.pend) >= fullBatch || p.lastSeq == p.ackedSeq.Load() && !p.lingering.Load())
		p.mu.Unlock()
		if send {
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
		return out
	case stateFallback:
		if p.replayReady.Load() {
			p.mu.Lock()
			r := p.replay
			p.replay = nil
			p.replayReady.Store(false)
			p.mu.Unlock()
			if len(r) > 0 {
				out = p.fb.Observe(r, out)
			}
		}
		return p.fb.Observe(events, out)
	}
	return out
}

// unstill drops the leading events the plugin stated change nothing and
// returns the rest; the first other event ends the statements, since the
// policy's state may change from it on. p.mu is held.
func (p *proxy[E, D]) unstill(events []E) []E {
	i := 0
	for i < len(events) && p.stillOps.covers(p.still, &events[i]) {
		i++
	}
	if i > 0 {
		p.stats.stilled.Add(int64(i))
	}
	if i < len(events) {
		p.still = p.still[:0]
	}
	return events[i:]
}

// setStill takes the statements of the answer to batch ack: they hold only
// if every event queued since that batch is one they name (the policy made
// them before seeing those). Then the pending events, all of them
// changing nothing, need not go either. An answer without statements ends
// those in force. p.mu is held.
func (p *proxy[E, D]) setStill(ack uint64, still []E) {
	p.still = p.still[:0]
	if len(still) == 0 || p.closed {
		return
	}
	for i := 0; i < p.n; i++ {
		b := &p.ring[(p.head+i)%maxInflight]
		if b.seq <= ack {
			continue
		}
		for j := range b.events {
			if !p.stillOps.covers(still, &b.events[j]) {
				return
			}
		}
	}
	for j := range p.pend {
		if !p.stillOps.covers(still, &p.pend[j]) {
			return
		}
	}
	p.stats.stilled.Add(int64(len(p.pend)))
	p.pend = p.pend[:0]
	p.still = append(p.still, still...)
}

func (p *proxy[E, D]) takeDecisions(out []D) []D {
	p.dmu.Lock()
	out = append(out, p.dpend...)
	clear(p.dpend) // a decision type may hold pointers one day
	p.dpend = p.dpend[:0]
	p.dn.Store(0)
	p.dmu.Unlock()
	return out
}

// sender is the sendLoop goroutine's own state: its timer, and what it
// last reported of the dropped events and when the last small batch went.
type sender struct {
	timer                  *time.Timer
	lastDropped            int64
	lastDropLog, lastSmall time.Time
}

// turn is what one pass of the sender found under p.mu: the batch to send
// (nil: none) and its seq, when the oldest batch in flight went (zero:
// none), how long a small pending batch has yet to linger, and the events
// dropped so far.
type turn[E any] struct {
	batch      []E
	seq        uint64
	oldest     time.Time
	lingerLeft time.Duration
	dropped    int64
}

// sendLoop ships pending batches to the plugin as the rules of take allow,
// and fails the plugin when a batch goes unanswered past the deadline.
func (p *proxy[E, D]) sendLoop() {
	defer p.wg.Done()
	// gRPC forbids CloseSend concurrent with Send: the sender closes its
	// own half of the stream, as it leaves.
	defer p.link.closeSend()
	s := &sender{timer: time.NewTimer(time.Hour)}
	s.timer.Stop()
	for {
		acked := p.ackedSeq.Load()
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.retire(acked)
		t := p.take(acked, s)
		p.mu.Unlock()

		p.countDropped(s, t.dropped)
		if t.batch != nil {
			// Counted before the send: the answer can come, and a Sync
			// return, before the send call does.
			p.stats.events.Add(int64(len(t.batch)))
			p.stats.batches.Add(1)
			if err := p.link.send(t.seq, t.batch); err != nil {
				p.fail(fmt.Errorf("sending events: %w", err))
				return
			}
			continue
		}
		if !p.await(s, t) {
			return
		}
	}
}

// retire frees the batches in flight that the plugin has answered (seq up
// to acked), keeping their slices for reuse. p.mu is held.
func (p *proxy[E, D]) retire(acked uint64) {
	for p.n > 0 && p.ring[p.head].seq <= acked {
		b := &p.ring[p.head]
		p.free = append(p.free, b.events[:0])
		b.events = nil
		p.head = (p.head + 1) % maxInflight
		p.n--
	}
}

// take moves the pending events into a batch in flight when one may go.
// A full batch goes out at once, up to maxInflight of them. A small one
// goes when nothing is in flight (Nagle's rule) and, while the plugin's
// answers are empty, no small one went in the last linger; meanwhile it
// grows. A mechanism that hands over an event at a time (after every
// poll) to a policy that mostly watches then costs a round trip per
// linger, not per event — on a machine whose cores the ranks keep busy,
// each round trip is a plugin process and two host threads taking a core
// — while a policy that is deciding, and a lone event after a quiet
// spell, go at once. p.mu is held.
func (p *proxy[E, D]) take(acked uint64, s *sender) turn[E] {
	var t turn[E]
	if p.n > 0 {
		t.oldest = p.ring[p.head].sent
	}
	if q := p.quiet.Load(); len(p.pend) > 0 && len(p.pend) < fullBatch && q > 0 {
		t.lingerLeft = min(linger<<min(q-1, 3), maxLinger) - time.Since(s.lastSmall)
	}
	if p.n < maxInflight && len(p.pend) > 0 && (len(p.pend) >= fullBatch || p.lastSeq == acked && t.lingerLeft <= 0) {
		if len(p.pend) < fullBatch {
			s.lastSmall = time.Now()
		}
		t.batch = p.pend
		if k := len(p.free); k > 0 {
			p.pend = p.free[k-1]
			p.free = p.free[:k-1]
		} else {
			p.pend = nil
		}
		p.lastSeq++
		t.seq = p.lastSeq
		now := time.Now()
		p.ring[(p.head+p.n)%maxInflight] = inflight[E]{seq: t.seq, sent: now, events: t.batch}
		p.n++
		if p.n == 1 {
			t.oldest = now
		}
	}
	t.dropped = p.dropped
	return t
}

// countDropped counts the events dropped since the last pass, and warns
// at most once a second.
func (p *proxy[E, D]) countDropped(s *sender, dropped int64) {
	if dropped == s.lastDropped {
		return
	}
	p.stats.dropped.Add(dropped - s.lastDropped)
	if time.Since(s.lastDropLog) > time.Second {
		p.log.Warn().Int64("dropped", dropped).Msg(p.what + ": plugin is behind; events dropped")
		s.lastDropLog = time.Now()
	}
	s.lastDropped = dropped
}

// await waits for Observe's wake-up, an answer, the oldest batch's
// deadline or the end of a small batch's linger. It fails the plugin when
// the oldest batch is past its deadline, and reports false when the
// sender is to stop.
func (p *proxy[E, D]) await(s *sender, t turn[E]) bool {
	wait := time.Duration(-1)
	if !t.oldest.IsZero() {
		age := time.Since(t.oldest)
		if age >= p.deadline {
			p.fail(fmt.Errorf("no answer to a batch of events for %v (deadline %v)", age.Round(time.Millisecond), p.deadline))
			return false
		}
		wait = p.deadline - age
	} else if t.lingerLeft > 0 {
		// A small batch waits out its linger; Observe need not wake us.
		wait = t.lingerLeft
		p.lingering.Store(true)
	}
	if wait >= 0 {
		s.timer.Reset(wait)
	}
	select {
	case <-p.wake:
	case <-p.ackWake:
	case <-s.timer.C:
	case <-p.ctx.Done():
		return false
	}
	p.lingering.Store(false)
	s.timer.Stop()
	return true
}

func (p *proxy[E, D]) recvLoop() {
	defer p.wg.Done()
	var buf []D
	var still []E
	var prev uint64
	for {
		ack, ds, err := p.link.recv(buf[:0])
		if err != nil {
			p.fail(fmt.Errorf("receiving decisions: %w", err))
			return
		}
		buf = ds
		if p.stillOps != nil {
			ds, still = p.stillOps.split(ds, still[:0])
		}
		p.mu.Lock()
		sent := p.lastSeq
		ok := ack == prev+1 && ack <= sent
		if ok && p.stillOps != nil {
			p.setStill(ack, still)
		}
		p.mu.Unlock()
		if !ok {
			p.fail(fmt.Errorf("protocol error: answer for batch %d, expected %d", ack, prev+1))
			return
		}
		prev = ack
		if len(ds) == 0 {
			p.quiet.Add(1)
		} else {
			p.quiet.Store(0)
		}
		if len(ds) > 0 {
			p.dmu.Lock()
			p.dpend = append(p.dpend, ds...)
			p.dn.Store(int64(len(p.dpend)))
			p.dmu.Unlock()
			p.stats.decisions.Add(int64(len(ds)))
		}
		p.ackedSeq.Store(ack)
		select {
		case p.ackWake <- struct{}{}:
		default:
		}
	}
}

// fail switches the policy away from the plugin, once. It returns at once;
// the switch happens on a goroutine of its own (it may have to wait for a
// Setup in progress), and p.failed is closed when it is done.
func (p *proxy[E, D]) fail(err error) {
	if p.state.Load() == stateClosed {
		return
	}
	p.failOnce.Do(func() {
		go p.switchOver(err)
	})
}

func (p *proxy[E, D]) switchOver(cause error) {
	defer close(p.failed)
	if p.explain != nil {
		cause = p.explain(cause)
	}
	p.err = fmt.Errorf("%s: plugin failed: %w", p.what, cause)
	// From here on events go to replay: first the batches the plugin never
	// answered, in order, then whatever was pending, then new ones.
	p.mu.Lock()
	p.closed = true
	// Replay at most maxPending events, the newest: under overload the
	// batches in flight can hold far more, and what matters to a policy
	// taking over is the recent state.
	skip := len(p.pend) - maxPending
	for i := 0; i < p.n; i++ {
		if b := &p.ring[(p.head+i)%maxInflight]; b.seq > p.ackedSeq.Load() {
			skip += len(b.events)
		}
	}
	for i := 0; i < p.n; i++ {
		b := &p.ring[(p.head+i)%maxInflight]
		if b.seq <= p.ackedSeq.Load() {
			continue
		}
		k := min(max(skip, 0), len(b.events))
		p.replay = append(p.replay, b.events[k:]...)
		skip -= k
		p.dropped += int64(k)
	}
	k := min(max(skip, 0), len(p.pend))
	p.replay = append(p.replay, p.pend[k:]...)
	p.dropped += int64(k)
	p.pend = nil
	p.mu.Unlock()
	p.cancel()
	p.stats.failures.Add(1)

	// p.err is final before the state changes: Setup and Err read it
	// once they see the new state.
	if p.abort {
		p.err = fmt.Errorf("%w (on_failure = \"abort\")", p.err)
		p.state.CompareAndSwap(stateRunning, stateAborted)
		p.log.Error().Err(cause).Msg(p.what + ": plugin failed; aborting the job (on_failure = \"abort\")")
	} else if fb, name, err := p.newFallback(); err != nil {
		p.err = fmt.Errorf("%w; fallback: %v", p.err, err)
		p.state.CompareAndSwap(stateRunning, stateAborted)
		p.log.Error().Err(cause).AnErr("fallback", err).Msg(p.what + ": plugin failed and its fallback could not start; no further decisions")
	} else {
		p.fb = fb
		p.replayReady.Store(true)
		if !p.state.CompareAndSwap(stateRunning, stateFallback) {
			return // closed meanwhile
		}
		p.log.Error().Err(cause).Str("fallback", name).Msg(p.what + ": plugin failed; switched to the built-in fallback")
	}
	if p.onFail != nil {
		p.onFail(p.err)
	}
}

// close stops the goroutines; the plugin process is the owner's to stop.
func (p *proxy[E, D]) close() {
	p.state.Store(stateClosed)
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
}

// wait waits for the goroutines to end (after close, or after the plugin
// was killed).
func (p *proxy[E, D]) wait() { p.wg.Wait() }

// errClosed is what a closed policy's Setup returns.
var errClosed = errors.New("policy closed")

// sync waits until the plugin has answered every event queued so far (or
// a statement kept it home: synced), or the plugin failed, or ctx ends.
func (p *proxy[E, D]) sync(ctx context.Context) error {
	p.mu.Lock()
	target := p.lastSeq
	if len(p.pend) > 0 {
		target++ // the pending events go out as the next batch
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	for !p.synced(target) {
		select {
		case <-p.failed:
			return p.err
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for answers: %w", p.what, ctx.Err())
		case <-time.After(100 * time.Microsecond):
		}
		if p.state.Load() == stateClosed {
			return fmt.Errorf("%s: %w", p.what, errClosed)
		}
	}
	return nil
}

// synced says whether the events queued before a sync that aimed at batch
// target are all done with: that batch answered, or — when the answer to
// an earlier batch kept the pending events from the plugin (setStill) and
// none came since — every batch sent answered, with target never to be
// sent.
func (p *proxy[E, D]) synced(target uint64) bool {
	if p.ackedSeq.Load() >= target {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSeq < target && len(p.pend) == 0 && p.ackedSeq.Load() >= p.lastSeq
}
