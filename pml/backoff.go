package pml

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobtl/gobtl/core"
)

// Backoff is the waiting policy of blocking calls: Spin polls in a tight
// loop, then Yield polls each followed by a yield of the processor to
// other processes (sched_yield), then sleeps starting at Sleep and
// doubling up to MaxSleep. Any progress starts over. Oversubscribed ranks
// (more ranks than cores, common on small machines) need the yields and
// sleeps so that they don't starve each other. The yield and the sleep are
// system calls, not runtime.Gosched and time.Sleep: Gosched does not give
// the core to another process, and the runtime's timers turn a 10 µs
// sleep into about a millisecond.
//
// A rank that owns its core (OwnCore) climbs that ladder only while
// another thread takes the core from it: see OwnCore.
type Backoff struct {
	Spin, Yield     int
	Sleep, MaxSleep time.Duration
	// OwnCore says the waiter is the one rank of its process and has a
	// core to itself (its node's ranks fit their cores, as `gobtl run`
	// binds them): it then spins for as long as it keeps the core, as an
	// Open MPI rank does, since a yield would give the core to no one and
	// a sleep only wakes late — a "10 µs" sleep takes 25 µs and more, so
	// a partner that is a little late made its partners sleep, and the
	// sleeps grew to MaxSleep (issue 29's 0.1–3.7 ms iterations). Every
	// ownSched of spinning it runs the Go runtime's own goroutines
	// (runtime.Gosched: timers, the launcher's state request), which also
	// keeps sysmon from preempting it with a signal every 10 ms. When a
	// look at the clock finds the spin was off the core for more than
	// ownGap — another thread ran there, a CPU hog or the rank's own
	// device goroutine — the core is shared after all: the waiters climb
	// the ladder (Spin, Yield, sleeps) for ownShared, where a timed sleep
	// wakes the rank ahead of a hog that a spin would queue behind. Its
	// sleeps are then raw system calls, as its yields are, after a
	// Gosched: sysmon does not take the P back for another thread to
	// hold, on the rank's own core, while the rank sleeps.
	OwnCore bool
}

// DefaultBackoff is used for zero fields of Options.Backoff.
var DefaultBackoff = Backoff{Spin: 2000, Yield: 50, Sleep: 10 * time.Microsecond, MaxSleep: 500 * time.Microsecond}

// The owned core's spin (Backoff.OwnCore).
const (
	// ownLook is how many rounds of the spin pass between two looks at
	// the clock: a round that finds nothing costs 10–100 ns, a look
	// about 40.
	ownLook = 16
	// ownGap is the longest time between two looks that is still the
	// rank's own: an interrupt or a kernel thread takes microseconds, one
	// call into a transport that moves a megabyte through the kernel
	// (btl ofi's fi_cq_read over tcp, copying a 1 MiB read) some hundreds,
	// another runnable thread a scheduler slice (0.75 ms at the least).
	// At 200 µs the megabyte's call passed for another thread 2 times in
	// each run of 3000 1 MiB ping-pongs over ofi/tcp, and the rank then
	// climbed the ladder for ownShared; at 500 µs 0-1 times, with the
	// median latency lower in 3 of 4 alternations (203, 237, 215, 273 µs
	// against 233, 242, 229, 225) and 0.4-0.9x the context switches.
	ownGap = 500 * time.Microsecond
	// ownSched is how long the spin runs before it lets the Go runtime's
	// goroutines run (Gosched: ~0.2 µs when none is ready); sysmon
	// preempts a goroutine that has run 10 ms.
	ownSched = 100 * time.Microsecond
	// ownShared is how long the waiters climb the ladder once one of
	// them found its core taken. A hog takes the core again within a
	// slice of its own after the waiters spin once more, and sends them
	// back up; a task that took the core once — the kernel's softirq
	// thread carrying the rank's own TCP traffic, another guest's time —
	// cost the ladder's sleeps for all of it. bw 1 MiB over ofi/tcp, 30
	// interleaved runs each: median 4700 MB/s at 50 ms against 4256 at
	// 1 s, runs under 3000 MB/s 1 against 3, sleeps 191 against 1062;
	// latency 8 B and 64 KiB beside a CPU hog the same (5 alternations).
	ownShared = 50 * time.Millisecond
	// ownResched is how often a rank that owns its core lets the
	// runtime's goroutines run from a loop of waits that each end before
	// their spin looks at the clock (keepScheduling).
	ownResched = time.Millisecond
)

// backoffState is what an engine's back-off keeps from one wait to the
// next: until when its core counts as shared, and its counters.
type backoffState struct {
	once sync.Once
	// sleeps and yields count the ladder's system calls; taken counts
	// the spins of an owned core that found it taken (ownGap).
	sleeps, yields, taken *core.Counter
	// until is the time (monotime) before which an owned core's waiters
	// climb the ladder instead of spinning.
	until atomic.Int64
	// waits counts the waits of an owned core, and resched is the time
	// (monotime) of keepScheduling's last Gosched.
	waits   atomic.Uint32
	resched atomic.Int64
}

// keepScheduling lets the Go runtime's goroutines run (runtime.Gosched)
// once every ownResched, looking at the clock every 256th wait of a rank
// that owns its core. A loop of waits that each end within a few polls —
// a ping-pong, a tight allreduce — never reaches a scheduling point of
// its own: sysmon then preempted it every 10 ms with a signal (SIGURG:
// about 100 in 2 s of such a loop here, none with a Gosched every
// 100 µs), and the runtime's timers and the launcher's state request
// waited for that signal.
func (s *backoffState) keepScheduling() {
	if s.waits.Add(1)&255 != 0 {
		return
	}
	now := monotime()
	// resched 0: never scheduled, however young the process (monotime
	// counts from the package's start).
	if last := s.resched.Load(); last != 0 && now-time.Duration(last) < ownResched {
		return
	}
	s.resched.Store(int64(now))
	runtime.Gosched()
}

type backoff struct {
	cfg   Backoff
	n     int
	sleep time.Duration
	// stall detection: the time of the last event, checked only once the
	// waiter sleeps, so the fast path never reads the clock.
	stall time.Duration
	clock core.Clock
	quiet time.Duration
	// idle is the clock as a core.IdleClock (virtual time), asserted
	// once here rather than on every round of a spinning waiter.
	idle core.IdleClock
	st   *backoffState

	// The owned core's spin: own while it goes on; now is its clock
	// (monotime, a test's fake), last the time of its last look (0: none
	// yet since the reset) and sched of its last Gosched.
	own         bool
	now         func() time.Duration
	last, sched time.Duration
}

// epoch is monotime's zero.
var epoch = time.Now()

// monotime is the real, monotonic time since epoch (never 0): the owned
// spin's clock, whatever clock the engine runs on.
func monotime() time.Duration { return time.Since(epoch) + 1 }

func (e *engine) newBackoff() backoff {
	st := &e.bo
	st.once.Do(func() {
		m := e.opts.Metrics
		st.sleeps, st.yields, st.taken = m.Counter("pml.backoff_sleeps"), m.Counter("pml.backoff_yields"), m.Counter("pml.backoff_core_taken")
	})
	b := backoff{cfg: e.opts.Backoff, stall: e.opts.StallTimeout, clock: e.opts.Clock, st: st, now: monotime}
	b.idle, _ = e.opts.Clock.(core.IdleClock)
	b.reset()
	return b
}

func (b *backoff) reset() {
	b.n, b.sleep, b.quiet = 0, b.cfg.Sleep, -1
	b.own, b.last = b.cfg.OwnCore, 0
}

// spinning reports whether the waiter still spins: the fused receive path
// then polls its peer alone but for every 64th round.
func (b *backoff) spinning() bool { return b.n < b.cfg.Spin || b.own }

// stalled reports whether the waiter has seen no event for the stall
// timeout.
func (b *backoff) stalled() bool {
	if b.stall <= 0 || b.n <= b.cfg.Spin+b.cfg.Yield || b.own && b.n%ownLook != 0 {
		return false
	}
	now := b.clock.Now()
	if b.quiet < 0 {
		b.quiet = now
	}
	return now-b.quiet >= b.stall
}

func (b *backoff) wait() {
	b.n++
	if b.idle != nil {
		// Virtual time: the simulator runs the other ranks and the
		// fabric until this one may have work.
		b.idle.Idle()
		return
	}
	if b.own && b.ownRound() {
		return
	}
	switch {
	case b.n <= b.cfg.Spin:
	case b.n <= b.cfg.Spin+b.cfg.Yield:
		osYield()
		b.st.yields.Inc()
	default:
		if b.cfg.OwnCore {
			runtime.Gosched() // the sleep holds the P
			osSleepRaw(b.sleep)
		} else {
			osSleep(b.sleep)
		}
		b.st.sleeps.Inc()
		if b.sleep *= 2; b.sleep > b.cfg.MaxSleep {
			b.sleep = b.cfg.MaxSleep
		}
	}
}

// ownRound is a round of an owned core's spin (Backoff.OwnCore). Every
// ownLook rounds it looks at the clock: it lets the runtime's goroutines
// run every ownSched, and it reports false — the waiter climbs the ladder
// from round n on — once the core is found taken, by this look or by
// another waiter's in the last ownShared.
func (b *backoff) ownRound() bool {
	if b.n%ownLook != 0 {
		return true
	}
	now := b.now()
	switch {
	case b.last == 0:
		if now < time.Duration(b.st.until.Load()) {
			b.own = false
			return false
		}
		b.sched = now
	case now-b.last > ownGap:
		b.st.until.Store(int64(now + ownShared))
		b.st.taken.Inc()
		b.own = false
		return false
	case now-b.sched >= ownSched:
		runtime.Gosched()
		// What the runtime ran is the rank's own time, not a gap.
		now = b.now()
		b.sched = now
	}
	b.last = now
	return true
}
