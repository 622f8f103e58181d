package core

import (
	"sync/atomic"
	"time"
)

// Clock is the time source of mechanisms that need one (backlog timing,
// idle detection, stripe delivery times). Tests inject a ManualClock so
// that time-dependent behaviour is deterministic.
type Clock interface {
	// Now is monotonic time since an arbitrary fixed origin.
	Now() time.Duration
}

var clockOrigin = time.Now()

type systemClock struct{}

func (systemClock) Now() time.Duration { return time.Since(clockOrigin) }

// SystemClock is the monotonic wall clock.
var SystemClock Clock = systemClock{}

// ManualClock is a Clock that moves only when told to. It is safe for
// concurrent use.
type ManualClock struct{ t atomic.Int64 }

// Now returns the current manual time.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.t.Load()) }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.t.Add(int64(d)) }

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Duration) { c.t.Store(int64(t)) }

// Scheduler-driven time. A simulator runs every rank of a job in one
// process on a virtual clock (package sim); a rank that has nothing to do
// must hand the processor to the simulator instead of spinning or
// sleeping, or virtual time would never move.

// IdleClock is a Clock that also schedules the ranks waiting on it: a
// simulator's virtual clock. A blocking call that polled and found nothing
// to do calls Idle instead of its back-off; Idle returns once the caller
// may have something to do (an event for it, or a timer). Mechanisms find
// it by type assertion on the injected Clock.
type IdleClock interface {
	Clock
	Idle()
}
