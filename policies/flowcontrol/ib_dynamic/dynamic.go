// Package ibdynamic (directory ib_dynamic) is the user-level dynamic flow control of seed 000 §4.3
// for the ib BTL: credits as in the static scheme, but each connection
// starts with few pre-posted buffers and the receiver adds more for a peer
// whose messages had to wait for credits.
//
// The feedback is the "went through the backlog" bit a frame carries when
// it waited for a credit at the sender; the receiver's mechanism reports
// each such frame (core.FlowBacklogged) and this policy answers with more
// buffers for that peer (core.FlowSetQuota): linearly, step more per
// backlogged frame (§5: the paper's implementation grows linearly), or
// exponentially, twice as many, up to max. A pattern that changes slowly
// against the time it takes to grow gets both performance and few buffers
// (§6.3.2, Table 2: at most 7 per connection for all NAS codes but LU).
//
// Beyond the paper (its §4.3 leaves decreasing to future work): with
// shrink_after set, a peer that has sent nothing for that long has its
// buffers halved, and halved again each time its silence doubles, never
// below the initial number. The mechanism takes a buffer back only when a
// frame has just been handled in it — never one that is posted and owed
// to the sender — so a quiet peer gives its buffers back as it resumes.
//
// The mechanism (btl/ib credits.go) clamps every proposal to [initial,
// max] and reports a clamp (core.FlowQuota), from which this policy
// resyncs its copy. Pure logic: no I/O, no goroutines, no clock — time
// arrives in the events.
package ibdynamic

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/flowcontrol/internal/ibcredit"
)

// Name is the component name.
const Name = "ib_dynamic"

// Policy is the dynamic scheme.
type Policy struct {
	// Initial buffers per peer on each per-peer queue, and the most a
	// peer may grow to.
	Initial, Max int
	// Step is the linear increase per backlogged frame.
	Step int
	// Exponential doubles instead of adding Step.
	Exponential bool
	// ShrinkAfter halves a quiet peer's buffers after this much silence;
	// 0 never shrinks (the paper's scheme).
	ShrinkAfter time.Duration
	// Threshold and Rndv are as in the static scheme.
	Threshold int
	Rndv      bool

	target  []int // per rank: what this policy last asked for (0: Initial)
	dirty   []int32
	isDirty []bool

	// Grown and Shrunk count the proposals made.
	Grown, Shrunk int
}

// Setup asks for credits starting at Initial buffers, growing to Max.
func (p *Policy) Setup(info core.FlowInfo) (core.FlowSetup, error) {
	if err := ibcredit.CheckResource(Name, info); err != nil {
		return core.FlowSetup{}, err
	}
	switch {
	case p.Initial < 1:
		return core.FlowSetup{}, fmt.Errorf("%s: initial %d: a peer needs at least one buffer", Name, p.Initial)
	case p.Max < p.Initial:
		return core.FlowSetup{}, fmt.Errorf("%s: max %d below initial %d", Name, p.Max, p.Initial)
	case p.Step < 1 || p.Threshold < 1 || p.ShrinkAfter < 0:
		return core.FlowSetup{}, fmt.Errorf("%s: step %d, credit_threshold %d, shrink_after %v: want step and threshold at least 1", Name, p.Step, p.Threshold, p.ShrinkAfter)
	}
	n := info.Ranks
	p.target = make([]int, n)
	p.isDirty = make([]bool, n)
	p.dirty = make([]int32, 0, n)
	return ibcredit.Credits(p.Initial, p.Max, p.Threshold, p.Rndv), nil
}

// Observe grows a peer for each backlogged frame of the batch, shrinks a
// quiet one, and proposes one number per peer it changed.
func (p *Policy) Observe(events []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	for _, ev := range events {
		i := int(ev.Peer)
		if i < 0 || i >= len(p.target) {
			continue
		}
		cur := p.cur(i)
		next := cur
		switch ev.Kind {
		case core.FlowBacklogged:
			base := max(cur, int(ev.Quota))
			if p.Exponential {
				next = min(2*base, p.Max)
			} else {
				next = min(base+p.Step, p.Max)
			}
			if next > cur {
				p.Grown++
			}
		case core.FlowIdle:
			if p.ShrinkAfter > 0 && time.Duration(ev.Value) >= p.ShrinkAfter && cur > p.Initial {
				next = max(p.Initial, cur/2)
				p.Shrunk++
			}
		case core.FlowQuota:
			// The mechanism clamped or set the number: take it as ours.
			p.target[i] = int(ev.Quota)
			continue
		}
		if next != cur {
			p.target[i] = next
			if !p.isDirty[i] {
				p.isDirty[i] = true
				p.dirty = append(p.dirty, int32(i))
			}
		}
	}
	for _, i := range p.dirty {
		p.isDirty[i] = false
		out = append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: i, Value: int64(p.target[i])})
	}
	p.dirty = p.dirty[:0]
	return out
}

// Target returns the number of buffers the policy last asked for a peer.
func (p *Policy) Target(peer int) int { return p.cur(peer) }

func (p *Policy) cur(i int) int {
	if p.target[i] == 0 {
		return p.Initial
	}
	return p.target[i]
}

// Params is the schema of the policy's HCL block.
var Params = []core.Param{
	{Name: "initial", Type: core.ParamInt, Default: "2", Min: "1", Max: "65535",
		Doc: "receive buffers posted per peer on each per-peer queue at connection (seed 000 §6.3.2: 1)"},
	{Name: "max", Type: core.ParamInt, Default: "128", Min: "1", Max: "65535",
		Doc: "the most buffers a peer may grow to (seed 000 Table 2: LU reached 63)"},
	{Name: "growth", Type: core.ParamString, Default: "linear", Enum: []string{"linear", "exponential"},
		Doc: "how a backlogged frame grows its sender's buffers: linear (+step; seed 000 §5) or exponential (×2)"},
	{Name: "step", Type: core.ParamInt, Default: "1", Min: "1", Max: "65535",
		Doc: "buffers added per backlogged frame under linear growth"},
	{Name: "shrink_after", Type: core.ParamDuration, Default: "0s", Min: "0s",
		Doc: "halve a quiet peer's buffers after this much silence, and again each time it doubles, never below initial; 0 never shrinks (the paper's scheme)"},
	ibcredit.ThresholdParam,
	ibcredit.RndvParam,
}

// New builds the policy from its parameters.
func New(p core.Params) *Policy {
	return &Policy{Initial: p.Int("initial"), Max: p.Int("max"), Step: p.Int("step"), Exponential: p.String("growth") == "exponential",
		ShrinkAfter: p.Duration("shrink_after"), Threshold: p.Int("credit_threshold"), Rndv: p.Bool("rndv_on_no_credit")}
}

func init() {
	ibcredit.Register(Name,
		"InfiniBand user-level dynamic flow control (seed 000 §4.3): as static, but each peer starts with few buffers "+
			"and grows (linearly or exponentially) when its frames went through the backlog; optionally shrinks when quiet.",
		Params, New)
}
