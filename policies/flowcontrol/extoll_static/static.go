// Package extollstatic (directory extoll_static) is the static credit-based flow control of seed
// 003 §5 for the EXTOLL BTL's VELO mailbox.
//
// Every receiver splits its mailbox into a data region, divided equally
// among its n senders (each one's credit quota), and a credit region of
// credit_slots per peer for the credit packets coming back. The receiver
// returns credits each time it has freed threshold slots of a sender,
//
//	threshold = quota div (credit_slots + 1) + 1        (Equation 1)
//
// which guarantees that the credit packet finds a free slot in the
// sender's credit region: to make the receiver reach the threshold a
// (credit_slots+1)-th time, the sender must have read one of the earlier
// credit packets. The two other formulas the paper examines fail — quota
// div credit_slots + 1 is never reached when credit_slots is 1 (deadlock)
// and quota div credit_slots overflows the credit region for quota 3 and
// two credit slots (Table 1). The regions obey
//
//	data region >= credit region >= 1 slot per process   (Equation 2).
//
// §5.3 found two credit slots per process the best trade-off and 58 slots
// per process enough for a low overhead; those are the defaults here and
// in the BTL.
//
// This package chooses the parameters; the mechanism (credit counters,
// threshold, credit packets, piggybacking) runs in btl/extoll/velo and
// checks what it is given. Pure logic: no I/O, no goroutines, no clock.
package extollstatic

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/flowcontrol/internal/mailboxsplit"
)

// Name is the component name.
const Name = "extoll_static"

// Threshold is Equation 1.
func Threshold(quota, creditSlots int) int { return quota/(creditSlots+1) + 1 }

// Policy is the static scheme.
type Policy struct {
	// CreditSlots per peer (§5.3: 2).
	CreditSlots int
	// Threshold overrides Equation 1 when positive (for experiments; the
	// mechanism clamps it to [1, quota]).
	Threshold int
}

// Setup splits the mailbox: quota = (slots - credit_slots*n) div n.
func (p *Policy) Setup(info core.FlowInfo) (core.FlowSetup, error) {
	quota, _, err := mailboxsplit.Quota(Name, info, p.CreditSlots)
	if err != nil {
		return core.FlowSetup{}, err
	}
	k := p.CreditSlots
	t := p.Threshold
	if t <= 0 {
		t = Threshold(quota, k)
	}
	return core.FlowSetup{Scheme: core.FlowCredits, CreditSlots: k, Quota: quota, CreditThreshold: t}, nil
}

// Observe has nothing to adjust: the partition is static.
func (p *Policy) Observe(_ []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	return out
}

// Params is the schema of the policy's HCL block.
var Params = []core.Param{
	mailboxsplit.CreditSlotsParam,
	{Name: "threshold", Type: core.ParamInt, Default: "0", Doc: "credit-return threshold; 0 means Equation 1, quota div (credit_slots+1) + 1", Min: "0"},
}

func init() {
	mailboxsplit.Register(Name,
		"EXTOLL static credit flow control (seed 003 §5): the mailbox's data region split equally among senders, credit slots per peer, threshold by Equation 1, piggybacked credits.",
		Params, func(p core.Params) core.FlowControl {
			return &Policy{CreditSlots: p.Int("credit_slots"), Threshold: p.Int("threshold")}
		})
}
