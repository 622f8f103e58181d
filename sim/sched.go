// Package sim runs a whole job — thousands of ranks — in one process on a
// virtual clock, so that the real pml, BTLs and policies can be measured
// at the scale the papers argue about (seed 000 §5, seed 002 §4, seed 003
// §5) on a machine with two cores. It simulates the fabric, never the
// mechanisms: the ranks run the unchanged stack over simulated devices
// (btl/ib/simrc) whose links follow a LogGP model.
//
// The scheduler is a discrete-event loop with one baton. Ranks are
// goroutines, but exactly one of them (or the loop itself) runs at a time,
// handing the baton over through channels; the loop picks the next rank
// from a FIFO of runnable ones and, when none is runnable, pops the
// earliest event (time, then insertion order) and advances virtual time to
// it. A rank that waits — the pml's back-off (core.IdleClock.Idle), a
// fence, a compute phase — gives the baton back. Nothing depends on the
// Go runtime's scheduling or the wall clock, so the same inputs give the
// same run, byte for byte.
package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrStalled reports a simulated job in which no rank can make progress:
// every rank waits and no event but idle timers is pending.
var ErrStalled = errors.New("sim: job stalled")

type rankState uint8

const (
	stNew rankState = iota
	stReady
	stRunning
	stIdle    // in Idle: woken by a device event or its timer
	stBlocked // in a fence: woken by the last rank to arrive
	stCompute // in Compute: woken by its timer
	stDone
)

// event is something that happens at virtual time t. idle marks a
// waiter's timer: a job whose only events are those is stalled.
type event struct {
	t    time.Duration
	seq  uint64
	fn   func()
	idle bool
}

// eventHeap is a binary min-heap of events by (time, insertion order),
// typed rather than through container/heap, whose interface boxed every
// event into an allocation of its own — millions of them in a 1,024-rank
// job.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	return h[i].t < h[j].t || h[i].t == h[j].t && h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = event{} // drop the closure
	q = q[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r := l + 1; r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// Options shape a scheduler.
type Options struct {
	// IdleMin and IdleMax bound the timer of an idle rank, which doubles
	// from IdleMin while nothing wakes it, as the pml's real back-off
	// sleeps; it serves the mechanisms' own timers (connection request
	// retransmission, policy ticks). Defaults 10µs and 1ms.
	IdleMin, IdleMax time.Duration
	// StallAfter is how long virtual time may pass with every rank
	// waiting and nothing but idle timers happening before the job
	// counts as stalled; default 2s.
	StallAfter time.Duration
	// SleepThrough keeps an idle rank asleep until its timer when its
	// device has an event, as the pml's real back-off sleeps once it has
	// spun and yielded: frames then batch up per progress call as on an
	// oversubscribed machine. By default an event wakes the rank at once
	// (an ideal poller), which gives the lowest latency and the most
	// progress calls.
	SleepThrough bool
}

// Sched is the virtual-time scheduler of one simulated job. It is the
// job's core.Clock (and core.IdleClock).
type Sched struct {
	opts    Options
	now     time.Duration
	seq     uint64
	events  eventHeap
	ready   []*rank
	ranks   []*rank
	running *rank
	back    chan struct{}
	live    int
	// work is the number of pending events that are not idle timers;
	// lastWork the time the last one ran.
	work     int
	lastWork time.Duration
	// fence
	fenceN    int
	fenceWait []*rank
	kv        []map[string][]byte
	id        string
	onStall   func(error)
	values    map[string]any
	stalls    int
	// Counters of the scheduler itself.
	Events, Switches int64
}

type rank struct {
	s       *Sched
	id      int
	resume  chan struct{}
	state   rankState
	gen     uint64 // invalidates a stale timer
	sleep   time.Duration
	pending bool // a device event arrived since the rank last idled
	err     error
}

// New returns a scheduler for an n-rank job called id (the job id its
// bootstraps report, which names its devices).
func New(id string, n int, o Options) *Sched {
	if o.IdleMin <= 0 {
		o.IdleMin = 10 * time.Microsecond
	}
	if o.IdleMax < o.IdleMin {
		o.IdleMax = max(time.Millisecond, o.IdleMin)
	}
	if o.StallAfter <= 0 {
		o.StallAfter = 2 * time.Second
	}
	s := &Sched{opts: o, back: make(chan struct{}), id: id, kv: make([]map[string][]byte, n)}
	s.ranks = make([]*rank, n)
	for i := range s.ranks {
		s.ranks[i] = &rank{s: s, id: i, resume: make(chan struct{}), sleep: o.IdleMin}
		s.kv[i] = map[string][]byte{}
	}
	return s
}

// Size is the number of ranks.
func (s *Sched) Size() int { return len(s.ranks) }

// Now is the virtual time.
func (s *Sched) Now() time.Duration { return s.now }

// Running is the rank that holds the baton, or -1 when the loop does.
func (s *Sched) Running() int {
	if s.running == nil {
		return -1
	}
	return s.running.id
}

// At runs fn on the loop at virtual time t (not before now). Devices
// schedule their deliveries with it; it must be called by whoever holds
// the baton.
func (s *Sched) At(t time.Duration, fn func()) { s.push(t, fn, false) }

func (s *Sched) push(t time.Duration, fn func(), idle bool) {
	if t < s.now {
		t = s.now
	}
	s.seq++
	if !idle {
		s.work++
	}
	s.events.push(event{t: t, seq: s.seq, fn: fn, idle: idle})
}

// Notify tells the scheduler that rank r's device has something for it:
// an idle rank becomes runnable.
func (s *Sched) Notify(r int) {
	k := s.ranks[r]
	if k.state == stIdle && !s.opts.SleepThrough {
		// Woken for this event, it will poll it: nothing is pending.
		k.sleep = s.opts.IdleMin
		s.makeReady(k)
		return
	}
	k.pending = true
}

func (s *Sched) makeReady(k *rank) {
	k.gen++
	k.state = stReady
	s.ready = append(s.ready, k)
}

// block gives the baton back to the loop and waits for it.
func (k *rank) block() {
	s := k.s
	s.back <- struct{}{}
	<-k.resume
}

// Idle is core.IdleClock's: the running rank has polled and found nothing
// to do. With an event delivered since it last idled it goes on at once;
// otherwise it waits for the next one or its timer.
func (s *Sched) Idle() {
	k := s.running
	if k == nil {
		return
	}
	if k.pending {
		k.pending = false
		if s.opts.SleepThrough {
			// It found work: its next wait starts short again, as the
			// pml's back-off resets after an event.
			k.sleep = s.opts.IdleMin
		}
		return
	}
	k.state = stIdle
	gen := k.gen
	s.push(s.now+k.sleep, func() {
		if k.state == stIdle && k.gen == gen {
			s.makeReady(k)
		}
	}, true)
	if k.sleep *= 2; k.sleep > s.opts.IdleMax {
		k.sleep = s.opts.IdleMax
	}
	k.block()
}

// Compute stands for d of computation on the running rank: virtual time
// passes for it while the others run.
func (s *Sched) Compute(d time.Duration) {
	k := s.running
	if k == nil || d <= 0 {
		return
	}
	k.state = stCompute
	s.At(s.now+d, func() { s.makeReady(k) })
	k.block()
}

// fence blocks the running rank until every rank of the job has called
// it.
func (s *Sched) fence() {
	k := s.running
	s.fenceN++
	if s.fenceN == len(s.ranks) {
		s.fenceN = 0
		for _, w := range s.fenceWait {
			s.makeReady(w)
		}
		s.fenceWait = s.fenceWait[:0]
		return
	}
	k.state = stBlocked
	s.fenceWait = append(s.fenceWait, k)
	k.block()
}

// OnStall sets what the loop does when the job stalls: typically abort
// every rank so that their blocking calls return. A second stall ends
// Run with ErrStalled.
func (s *Sched) OnStall(fn func(error)) { s.onStall = fn }

// Run runs fn on every rank and returns when all have returned, with the
// ranks' errors joined (rank order). Ranks start in rank order at time 0.
func (s *Sched) Run(fn func(rank int) error) error {
	for _, k := range s.ranks {
		go func(k *rank) {
			<-k.resume
			err := fn(k.id)
			if err != nil {
				k.err = fmt.Errorf("rank %d: %w", k.id, err)
			}
			k.state = stDone
			s.live--
			s.back <- struct{}{}
		}(k)
		s.makeReady(k)
	}
	s.live = len(s.ranks)
	for s.live > 0 {
		if len(s.ready) > 0 {
			k := s.ready[0]
			s.ready[0] = nil
			s.ready = s.ready[1:]
			s.running = k
			k.state = stRunning
			s.Switches++
			k.resume <- struct{}{}
			<-s.back
			s.running = nil
			continue
		}
		if len(s.events) == 0 {
			// The first stall aborts the job (OnStall) and readies the
			// waiters, which then return their errors: go on.
			if err := s.stalled(fmt.Errorf("%w at %v: no rank can run and no event is pending (%s)", ErrStalled, s.now, s.states())); err != nil {
				return err
			}
			continue
		}
		ev := s.events.pop()
		s.now = ev.t
		s.Events++
		if !ev.idle {
			s.work--
			s.lastWork = s.now
		} else if s.work == 0 && s.now-s.lastWork > s.opts.StallAfter {
			err := fmt.Errorf("%w at %v: every rank has waited %v with nothing in flight (%s)", ErrStalled, s.now, s.opts.StallAfter, s.states())
			if e := s.stalled(err); e != nil {
				return e
			}
		}
		ev.fn()
	}
	var errs []error
	for _, k := range s.ranks {
		if k.err != nil {
			errs = append(errs, k.err)
		}
	}
	return errors.Join(errs...)
}

// stalled handles a stall: the first time the OnStall hook (if any)
// aborts the job and the loop goes on so that the ranks return; then it
// gives up. Giving up leaves the rank goroutines parked.
func (s *Sched) stalled(err error) error {
	s.stalls++
	if s.onStall == nil || s.stalls > 1 {
		return err
	}
	s.lastWork = s.now
	s.onStall(err)
	for _, k := range s.ranks {
		if k.state == stIdle || k.state == stBlocked {
			s.makeReady(k)
		}
	}
	s.fenceWait, s.fenceN = s.fenceWait[:0], 0
	return nil
}

func (s *Sched) states() string {
	var c [stDone + 1]int
	for _, k := range s.ranks {
		c[k.state]++
	}
	return fmt.Sprintf("%d idle, %d in a fence, %d computing, %d done", c[stIdle], c[stBlocked], c[stCompute], c[stDone])
}

// Boot is rank r's bootstrap (core.Bootstrap) in this job: the key-value
// exchange lives in the scheduler and a fence is a scheduler barrier.
func (s *Sched) Boot(r int) *Boot { return &Boot{s: s, rank: r} }

// Boot is a simulated rank's core.Bootstrap.
type Boot struct {
	s    *Sched
	rank int
}

// Rank is this rank.
func (b *Boot) Rank() int { return b.rank }

// Size is the job's size.
func (b *Boot) Size() int { return len(b.s.ranks) }

// JobID names the job; the simulated devices find their fabric by it.
func (b *Boot) JobID() string { return b.s.id }

// Put publishes value under key.
func (b *Boot) Put(key string, value []byte) error {
	b.s.kv[b.rank][key] = append([]byte(nil), value...)
	return nil
}

// Fence waits for every rank.
func (b *Boot) Fence(ctx context.Context) error {
	b.s.fence()
	return ctx.Err()
}

// Get returns what rank published under key before the last fence.
func (b *Boot) Get(ctx context.Context, rank int, key string) ([]byte, error) {
	if rank < 0 || rank >= len(b.s.ranks) {
		return nil, fmt.Errorf("sim: get %q from rank %d of %d", key, rank, len(b.s.ranks))
	}
	v, ok := b.s.kv[rank][key]
	if !ok {
		return nil, fmt.Errorf("sim: rank %d published no %q", rank, key)
	}
	return v, nil
}

// jobs are the schedulers of the simulated jobs of this process by job
// id, where their devices find them.
var jobs = struct {
	sync.Mutex
	m map[string]*Sched
}{m: map[string]*Sched{}}

// Register makes s findable by its job id (Lookup) until Unregister.
func (s *Sched) Register() error {
	jobs.Lock()
	defer jobs.Unlock()
	if jobs.m[s.id] != nil {
		return fmt.Errorf("sim: job %q is already running", s.id)
	}
	jobs.m[s.id] = s
	return nil
}

// Unregister forgets s.
func (s *Sched) Unregister() {
	jobs.Lock()
	defer jobs.Unlock()
	delete(jobs.m, s.id)
}

// Lookup returns the scheduler of the job called id.
func Lookup(id string) *Sched {
	jobs.Lock()
	defer jobs.Unlock()
	return jobs.m[id]
}

// Value returns the job-wide value called key, made by mk on first use
// (a simulated fabric keeps its state here). Only the baton holder calls
// it.
func (s *Sched) Value(key string, mk func() any) any {
	if s.values == nil {
		s.values = map[string]any{}
	}
	v, ok := s.values[key]
	if !ok {
		v = mk()
		s.values[key] = v
	}
	return v
}
