package velo

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
)

// dynamicRegion is the dynamic scheme's data region (seed 003 §6): a
// sender starts with its static slots (credit_slots, Equation 2) and the
// FIFO with ones; the rest of its intended quota is granted out of the
// shared pool of free slots as it uses its credits, thresholds follow
// Equation 1 of the intended quota, and every credit_slots+1 pops is a
// monitoring point reported to the policy (§6.4), which moves quota
// between senders and asks idle ones for their credits back (§6.5).
type dynamicRegion struct{}

func (dynamicRegion) init(c *credits, share int) (int, int32) {
	c.static, c.initial = c.k, c.k
	return max(min(share, c.maxQuota), c.static), 1
}

func (dynamicRegion) next(c *credits, src int, r *rxState) int32 {
	if r.pops%uint32(c.k+1) == 0 {
		c.e.m.monitors.Inc()
		c.event(core.FlowMonitor, src, r.intended, int64(r.current))
	}
	return int32(c.thresholdOf(int(r.intended)))
}

// apply takes quota changes and compulsory returns.
func (dynamicRegion) apply(c *credits, d core.FlowDecision) policy.Verdict {
	switch d.Kind {
	case core.FlowSetQuota:
		return setQuota(c, int(d.Peer), d.Value)
	case core.FlowReclaim:
		reclaim(c, int(d.Peer))
		return policy.Applied
	}
	return policy.Rejected
}

func (dynamicRegion) kind() int64 { return SchemeDynamic }

func (dynamicRegion) layout(c *credits) string {
	return fmt.Sprintf("dynamic k=%d static=%d data=%d", c.k, c.static, c.data)
}

// setQuota sets a sender's intended quota: never below its static slots,
// never above the cap, and growing only out of unassigned data slots. It
// answers every proposal with the quota set (core.FlowQuota), clamped or
// not: a plugin policy's proposals are applied a round trip after it made
// them, and only the answers tell it which events predate them.
func setQuota(c *credits, p int, v int64) policy.Verdict {
	r := &c.rx[p]
	want := min(max(v, int64(c.static)), int64(c.maxQuota))
	cur := int64(r.intended)
	switch {
	case want < cur:
		c.unassigned += int(cur - want)
		c.e.m.steals.Inc()
		c.e.m.stolen.Add(cur - want)
	case want > cur:
		want = cur + min(want-cur, int64(c.unassigned))
		c.unassigned -= int(want - cur)
	}
	r.intended = int32(want)
	c.event(core.FlowQuota, p, r.intended, int64(r.current))
	if want != v {
		return policy.Clamped
	}
	return policy.Applied
}

// reclaim sends a compulsory credit return request to a sender holding
// more than its intended quota (§6.5, Figure 13).
func reclaim(c *credits, p int) {
	r := &c.rx[p]
	if r.blocked || r.current <= r.intended {
		c.e.m.reclaimSkipped.Inc()
		return
	}
	r.blocked = true
	c.e.tx[p].wantReq = true
	c.flush(p)
}
