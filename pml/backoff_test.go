package pml

import (
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// ownedBackoff is the back-off of one wait on a core the rank owns, on a
// fake clock that advances step at every look, with fresh counters in st
// (nil: new ones).
func ownedBackoff(st *backoffState, clock *time.Duration, step time.Duration) backoff {
	if st == nil {
		st = new(backoffState)
		m := core.NewMetrics()
		st.sleeps, st.yields, st.taken = m.Counter("s"), m.Counter("y"), m.Counter("t")
	}
	b := backoff{
		cfg: Backoff{Spin: 40, Yield: 5, Sleep: 10 * time.Microsecond, MaxSleep: 20 * time.Microsecond, OwnCore: true},
		st:  st, clock: core.SystemClock,
		now: func() time.Duration { *clock += step; return *clock },
	}
	b.reset()
	return b
}

// A rank that owns its core keeps polling — no yield, no sleep — for as
// long as every look at the clock finds it was on its core, however long
// the wait. (Without OwnCore the same 100,000 rounds make 5 yields and
// thousands of sleeps.)
func TestARankThatOwnsItsCoreSpinsWhileItKeepsTheCore(t *testing.T) {
	clock := time.Second
	b := ownedBackoff(nil, &clock, time.Microsecond)
	for range 100_000 {
		b.wait()
		if !b.spinning() {
			t.Fatalf("round %d: the waiter stopped spinning on a core it kept", b.n)
		}
	}
	if y, s, k := b.st.yields.Load(), b.st.sleeps.Load(), b.st.taken.Load(); y != 0 || s != 0 || k != 0 {
		t.Fatalf("%d yields, %d sleeps, core taken %d times: want none", y, s, k)
	}
}

// A look that finds the waiter was off its core for longer than ownGap —
// another thread ran there — sends it up the ladder: having spun past
// Spin and Yield rounds it sleeps at once, and every wait of the engine
// climbs the whole ladder (Spin, Yield, sleeps) for ownShared; after that
// they spin again.
func TestAnOwnedCoreFoundTakenClimbsTheLadderForAWhile(t *testing.T) {
	clock := time.Second
	b := ownedBackoff(nil, &clock, time.Microsecond)
	for range 20 * ownLook {
		b.wait()
	}
	clock += ownGap + time.Microsecond // off the core
	for i := 0; b.own && i <= ownLook; i++ {
		b.wait() // the round that finds it sleeps
	}
	if k, y, s := b.st.taken.Load(), b.st.yields.Load(), b.st.sleeps.Load(); k != 1 || y != 0 || s != 1 {
		t.Fatalf("core taken %d times, then %d yields and %d sleeps: want 1, 0 and 1", k, y, s)
	}

	// The next wait, before ownShared has passed, climbs the ladder.
	next := ownedBackoff(b.st, &clock, time.Microsecond)
	for range next.cfg.Spin + next.cfg.Yield + 1 {
		next.wait()
	}
	if next.own || next.spinning() {
		t.Fatal("a wait right after the core was found taken spins on")
	}
	if y, s := b.st.yields.Load(), b.st.sleeps.Load(); y != int64(next.cfg.Yield) || s != 2 {
		t.Fatalf("a wait after the core was found taken: %d yields and %d sleeps, want %d and 1", y, s-1, next.cfg.Yield)
	}

	// Once it has passed, a wait spins again.
	clock += ownShared
	again := ownedBackoff(b.st, &clock, time.Microsecond)
	for range 100 * ownLook {
		again.wait()
	}
	if !again.own || b.st.sleeps.Load() != 2 {
		t.Fatal("a wait long after the core was found taken does not spin")
	}
}

// Progress starts a wait's spin over, and a reset wait that has not yet
// looked at the clock spins.
func TestProgressStartsTheOwnedSpinOver(t *testing.T) {
	clock := time.Second
	b := ownedBackoff(nil, &clock, time.Microsecond)
	b.own = false // as if found taken in this wait
	b.n = 1000
	b.reset()
	if !b.own || b.n != 0 || b.last != 0 {
		t.Fatalf("after reset: own %v, n %d, last %v", b.own, b.n, b.last)
	}
}

// An engine whose back-off says nothing but OwnCore gets the default
// ladder for when its core is taken, and keeps OwnCore.
func TestOwnCoreAloneKeepsTheDefaultLadder(t *testing.T) {
	c, err := New(0, 1, nil, Options{Backoff: Backoff{OwnCore: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := DefaultBackoff
	want.OwnCore = true
	if got := c.e.opts.Backoff; got != want {
		t.Fatalf("back-off %+v, want %+v", got, want)
	}
}

// A rank that owns its core lets the runtime's goroutines run once every
// ownResched, looking at the clock every 256th wait.
func TestALoopOfShortWaitsKeepsScheduling(t *testing.T) {
	var st backoffState
	for range 255 {
		st.keepScheduling()
	}
	if st.resched.Load() != 0 {
		t.Fatal("looked at the clock before the 256th wait")
	}
	st.keepScheduling()
	first := st.resched.Load()
	if first == 0 {
		t.Fatal("the 256th wait did not schedule")
	}
	for range 256 {
		st.keepScheduling()
	}
	if got := st.resched.Load(); got != first && time.Duration(got-first) < ownResched {
		t.Fatalf("scheduled again %v after the last time, want %v", time.Duration(got-first), ownResched)
	}
}
