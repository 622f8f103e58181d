package velo

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
)

// staticRegion is the static scheme's data region (seed 003 §5): each
// sender's quota is fixed and handed out whole at start, and every
// threshold is the same — Equation 1 of the quota, or the policy's.
type staticRegion struct {
	t int // the threshold
}

func (s *staticRegion) init(c *credits, share int) (int, int32) {
	c.static, c.initial = share, share
	s.t = c.e.setup.CreditThreshold
	if c.threshold != nil || s.t <= 0 {
		// A test's formula replaces Equation 1 and the policy's choice.
		s.t = c.thresholdOf(share)
	}
	if !c.unchecked && (s.t < 1 || s.t > share) {
		// A threshold above the quota is never reached (seed 003 Table 1,
		// formula (a)): clamp it.
		c.e.log.Warn().Int("threshold", s.t).Int("quota", share).Msg("velo: threshold out of [1, quota]; clamped")
		c.e.m.rejected.Inc()
		s.t = min(max(s.t, 1), share)
	}
	return share, int32(s.t)
}

func (s *staticRegion) next(*credits, int, *rxState) int32 { return int32(s.t) }

// apply takes a new threshold within [1, quota]; the quotas do not move.
func (s *staticRegion) apply(c *credits, d core.FlowDecision) policy.Verdict {
	if d.Kind != core.FlowSetThreshold || d.Value < 1 || d.Value > int64(c.initial) {
		return policy.Rejected
	}
	s.t = int(d.Value)
	return policy.Applied
}

func (s *staticRegion) kind() int64 { return SchemeStatic }

func (s *staticRegion) layout(c *credits) string {
	return fmt.Sprintf("static k=%d quota=%d threshold=%d", c.k, c.static, s.t)
}
