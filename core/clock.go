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
