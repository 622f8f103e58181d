// Package policy is the mechanism's side of the policy contract of core
// (core/policy.go): one Driver that every mechanism — the ib credit engine
// and receive queues, EXTOLL's VELO credit engine, the pml's multirail
// scheduler — runs between itself and its policy.
//
// A mechanism reports what it saw with Event, and the Driver batches the
// events. It hands a batch to the policy's Observe when the mechanism
// flushes (at the end of a progress pass), when the batch is full, or —
// with no events — once the poll interval has passed, so that a plugin's
// late decisions are collected (core.PolicyPollInterval). Each decision
// the policy returns goes to the mechanism's Apply, which checks it
// against the mechanism's current state and applies what holds ("policy
// proposes, mechanism disposes"); the Driver counts what Apply clamped or
// rejected. Events the mechanism raises while applying (a clamp it
// reports back) go to the next batch.
//
// The Driver never blocks and allocates nothing once its buffers have
// grown to the largest batch: a built-in policy answers in the call, a plugin's
// Observe only queues the batch for its process (package plugins), so no
// RPC runs on the mechanism's path.
package policy

import (
	"time"

	"github.com/gobtl/gobtl/core"
)

// Observer is the half of a policy the Driver calls: core.FlowControl,
// core.RecvBuffers and core.Scheduler are each an Observer of their event
// and decision types.
type Observer[E, D any] interface {
	Observe(events []E, out []D) []D
}

// Verdict is what a mechanism made of a decision.
type Verdict uint8

const (
	// Applied: the decision held and took effect as proposed.
	Applied Verdict = iota
	// Clamped: the decision took effect after the mechanism bounded it.
	Clamped
	// Rejected: the decision did not hold and was dropped.
	Rejected
)

// Config is what a Driver needs from its mechanism.
type Config[E, D any] struct {
	// Policy is the policy driven; nil makes a Driver that does nothing.
	Policy Observer[E, D]
	// Apply disposes of the decisions at the head of ds: it checks ds[0]
	// — and the decisions after it that stand or fall with it, such as
	// the weights of one peer — against the mechanism's current state,
	// applies what holds and returns how many decisions it took (at least
	// one) and their verdict. Each adapts a function of one decision.
	Apply func(ds []D) (int, Verdict)
	// Batch hands the events to the policy as soon as this many wait,
	// even before the mechanism flushes; 0 waits for Flush or Tick.
	Batch int
	// Interval is the longest the Driver goes without calling Observe
	// while Tick is called (default core.PolicyPollInterval).
	Interval time.Duration
	// Clock times the calls (default core.SystemClock).
	Clock core.Clock
	// Clamped and Rejected count the decisions Apply clamped or rejected
	// (one count per decision taken); nil counts nowhere.
	Clamped, Rejected *core.Counter
}

// Driver batches a mechanism's events for its policy and applies the
// policy's decisions through the mechanism. It is not safe for concurrent
// use: the mechanism calls it with its own lock held, as it calls the
// policy (core/policy.go). The zero Driver does nothing.
type Driver[E, D any] struct {
	cfg       Config[E, D]
	events    []E
	out       []D
	last      time.Duration // when Observe was last called
	observing bool
}

// Init sets the driver up; the first poll interval runs from now.
func (d *Driver[E, D]) Init(c Config[E, D]) {
	if c.Interval <= 0 {
		c.Interval = core.PolicyPollInterval
	}
	if c.Clock == nil {
		c.Clock = core.SystemClock
	}
	// The buffers grow with the first batches and are kept: a Driver per
	// peer costs nothing until its peer has events.
	*d = Driver[E, D]{cfg: c, last: c.Clock.Now()}
}

// Each adapts a function that disposes of one decision to Config.Apply.
func Each[D any](apply func(D) Verdict) func([]D) (int, Verdict) {
	return func(ds []D) (int, Verdict) { return 1, apply(ds[0]) }
}

// Active reports whether a policy is attached.
func (d *Driver[E, D]) Active() bool { return d.cfg.Policy != nil }

// Pending is how many events wait for the policy.
func (d *Driver[E, D]) Pending() int { return len(d.events) }

// Waiting returns the events that wait for the policy, for diagnostics;
// the slice is the Driver's and valid until its next call.
func (d *Driver[E, D]) Waiting() []E { return d.events }

// Event reports ev to the policy: it joins the batch, which goes at once
// when it is full. Without a policy it is dropped.
func (d *Driver[E, D]) Event(ev E) {
	if d.cfg.Policy == nil {
		return
	}
	d.events = append(d.events, ev)
	if d.cfg.Batch > 0 && len(d.events) >= d.cfg.Batch && !d.observing {
		d.observe(d.cfg.Clock.Now())
	}
}

// Flush hands the waiting events, if any, to the policy and applies its
// decisions.
func (d *Driver[E, D]) Flush() {
	if len(d.events) > 0 && !d.observing {
		d.observe(d.cfg.Clock.Now())
	}
}

// Tick calls the policy if events wait or the poll interval has passed
// since its last call, so that decisions a plugin sends late are applied.
// now is the mechanism's reading of the Driver's clock.
func (d *Driver[E, D]) Tick(now time.Duration) {
	if d.cfg.Policy == nil || d.observing {
		return
	}
	if len(d.events) > 0 || now-d.last >= d.cfg.Interval {
		d.observe(now)
	}
}

// observe hands the batch to the policy and applies what it proposes.
// Events raised while applying go to the next batch.
func (d *Driver[E, D]) observe(now time.Duration) {
	d.observing = true
	out := d.cfg.Policy.Observe(d.events, d.out[:0])
	d.events = d.events[:0]
	d.Dispose(out)
	d.out = out[:0] // keep the room the policy grew
	d.last = now
	d.observing = false
}

// Dispose hands decisions to the mechanism's Apply and counts what it
// clamped and rejected, as for decisions the policy returned.
func (d *Driver[E, D]) Dispose(ds []D) {
	for len(ds) > 0 {
		n, v := d.cfg.Apply(ds)
		n = min(max(n, 1), len(ds))
		switch v {
		case Clamped:
			add(d.cfg.Clamped, n)
		case Rejected:
			add(d.cfg.Rejected, n)
		}
		ds = ds[n:]
	}
}

func add(c *core.Counter, n int) {
	if c != nil {
		c.Add(int64(n))
	}
}
