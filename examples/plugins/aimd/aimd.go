// Command aimd is a flow-control policy plugin for gobtl, written the way a
// third party writes one: it imports gobtl's plugins/sdk, implements
// core.FlowControl, and is built on its own with `go build`.
//
// The policy is additive-increase, multiplicative-decrease (AIMD, as in
// TCP's congestion window) applied to the buffers a receiver pre-posts for
// each sender. Liu & Panda's dynamic scheme (seed 000 §4.3) grows a peer's
// buffers when its messages arrive marked "went through the backlog", and
// leaves shrinking to future work; aimd does both:
//
//   - a peer that wants more — a frame carrying the backlog bit, with
//     posted buffers (FlowBacklogged), a sender that used up its credits,
//     in a slot pool (FlowMonitor, seed 003 §6.4) — gets `step` more
//     buffers, up to `max`;
//   - a peer quiet for at least `idle_after` (FlowIdle) has its buffers
//     multiplied by `decrease`, never below `initial`.
//
// On a resource that is a fixed pool of slots (EXTOLL's mailbox, seed
// 003), a peer only grows into buffers no other peer holds; when none are
// left, the peer holding the most gives up a `decrease` share of its own
// (multiplicative decrease under contention, where seed 003 §6 steals by
// Equation 6). So the policy never promises credits beyond what exists —
// and the mechanism checks every decision anyway: the policy proposes,
// the mechanism disposes.
package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
)

// params is the schema of the policy block's body: gobtl checks a stack
// file against it before the job starts.
var params = []core.Param{
	{Name: "initial", Type: core.ParamInt, Default: "2", Doc: "buffers posted per peer at start, and the floor of a decrease", Min: "1"},
	{Name: "max", Type: core.ParamInt, Default: "64", Doc: "most buffers posted for one peer", Min: "1"},
	{Name: "step", Type: core.ParamInt, Default: "2", Doc: "buffers added when a peer's frame went through the backlog", Min: "1"},
	{Name: "decrease", Type: core.ParamFloat, Default: "0.5", Doc: "factor applied to an idle peer's buffers, in (0, 1)",
		Check: func(v any) error {
			if f := v.(float64); f <= 0 || f >= 1 {
				return errors.New("decrease must be in (0, 1)")
			}
			return nil
		}},
	{Name: "idle_after", Type: core.ParamDuration, Default: "10ms", Doc: "how long a peer is quiet before its buffers shrink"},
}

// aimd is the policy. gobtl calls it from one goroutine at a time.
type aimd struct {
	initial, max, step int
	decrease           float64
	idleAfter          time.Duration

	limit int // most buffers for one peer on this resource

	budget int   // buffers that exist for all peers; 0 = unbounded
	posted []int // buffers the policy has asked for, per peer
	total  int
}

func newAIMD(p core.Params) (core.FlowControl, error) {
	a := &aimd{initial: p.Int("initial"), max: p.Int("max"), step: p.Int("step"),
		decrease: p.Float("decrease"), idleAfter: p.Duration("idle_after")}
	if a.initial > a.max {
		return nil, fmt.Errorf("initial (%d) is above max (%d)", a.initial, a.max)
	}
	return a, nil
}

// Setup chooses user-level credits with a.initial buffers per peer. The
// resource decides the rest: posted buffers grow freely up to max, a slot
// pool is shared.
func (a *aimd) Setup(info core.FlowInfo) (core.FlowSetup, error) {
	if info.Senders < 1 || info.Ranks < info.Senders {
		return core.FlowSetup{}, fmt.Errorf("aimd: %d senders among %d ranks", info.Senders, info.Ranks)
	}
	s := core.FlowSetup{
		Scheme:          core.FlowCredits,
		Quota:           a.initial,
		MaxQuota:        a.max,
		CreditThreshold: max(1, a.initial/2), // return credits before a peer runs dry
	}
	switch info.Resource {
	case core.ResourcePostedBuffers:
		// Out of credits, go by rendezvous (seed 000 §4.2); the device's
		// RNR retry, forever, carries the credit frames.
		s.RndvOnNoCredit, s.RNRRetry = true, 7
		a.budget = 0
	case core.ResourceSlotPool:
		// A slot per sender for credit packets (seed 003 §5); the rest of
		// the pool is for data. Quotas move only in a dynamic region
		// (§6): there the engine applies FlowSetQuota and reports
		// monitoring points.
		s.CreditSlots, s.DynamicRegion = 1, true
		a.budget = info.Buffers - s.CreditSlots*info.Senders
		if a.initial*info.Senders > a.budget {
			return core.FlowSetup{}, fmt.Errorf("aimd: %d senders × %d initial buffers exceed the %d that exist", info.Senders, a.initial, a.budget)
		}
		// A sender can hold its own share plus whatever the others leave.
		s.MaxQuota = min(a.max, a.budget-(info.Senders-1)*a.initial)
	default:
		return core.FlowSetup{}, fmt.Errorf("aimd: does not know how to divide a %v", info.Resource)
	}
	a.posted = make([]int, info.Ranks) // events name peers by rank
	for i := range a.posted {
		a.posted[i] = a.initial
	}
	a.total = a.initial * info.Senders
	a.limit = s.MaxQuota
	return s, nil
}

// Observe reacts to a batch of events from the credit engine.
func (a *aimd) Observe(events []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	for _, e := range events {
		p := int(e.Peer)
		if p < 0 || p >= len(a.posted) {
			continue // not a peer we were set up for
		}
		switch e.Kind {
		case core.FlowBacklogged, core.FlowMonitor:
			// A frame that waited in the backlog (posted buffers), or a
			// sender that used up the credits granted since its last
			// monitoring point (a slot pool, seed 003 §6.4): it wants more.
			out = a.grow(p, out)
		case core.FlowIdle:
			if time.Duration(e.Value) >= a.idleAfter {
				out = a.set(p, max(a.initial, int(float64(a.posted[p])*a.decrease)), out)
			}
		case core.FlowQuota:
			// The engine clamped a proposal: take its value as the truth.
			a.total += int(e.Quota) - a.posted[p]
			a.posted[p] = int(e.Quota)
		}
	}
	return out
}

// grow adds step buffers for p. On a fixed pool with none left, the peer
// holding the most gives up a multiplicative share first.
func (a *aimd) grow(p int, out []core.FlowDecision) []core.FlowDecision {
	want := min(a.posted[p]+a.step, a.limit)
	if a.budget > 0 && want-a.posted[p] > a.budget-a.total {
		v := -1
		for i, n := range a.posted {
			if i != p && n > a.initial && (v < 0 || n > a.posted[v]) {
				v = i
			}
		}
		if v >= 0 {
			out = a.set(v, max(a.initial, int(float64(a.posted[v])*a.decrease)), out)
		}
		want = min(want, a.posted[p]+a.budget-a.total)
	}
	return a.set(p, want, out)
}

// set proposes n buffers for p, if that is a change.
func (a *aimd) set(p, n int, out []core.FlowDecision) []core.FlowDecision {
	if n == a.posted[p] {
		return out
	}
	a.total += n - a.posted[p]
	a.posted[p] = n
	return append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: int32(p), Value: int64(n)})
}

func main() {
	sdk.Serve(sdk.Plugin{
		Name:           "aimd",
		Version:        "0.1.0",
		Doc:            "additive-increase, multiplicative-decrease pre-posted buffers per peer",
		Params:         params,
		NewFlowControl: newAIMD,
	})
}
