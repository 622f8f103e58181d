// Package ibhardware (directory ib_hardware) is the hardware-based flow control of seed 000 §4.1 for
// the ib BTL: no flow control in software at all.
//
// Every outgoing frame is posted to the send queue at once. A receiver
// that has no buffer posted for it answers RNR NAK (Receiver Not Ready);
// the sender's HCA waits the receiver's min_rnr_timer and sends again, and
// with rnr_retry 7 it does so forever, so the message is delivered once a
// buffer is reposted. The HCA, not the MPI layer, holds a fast sender
// back. There is nothing to keep track of — no credits, no backlog, no
// explicit credit messages — hence the least overhead while buffers
// suffice, and time-outs and retransmissions when they do not (§6.3.2: LU
// and MG at one pre-posted buffer). Nothing reaches the MPI layer about
// it, so the number of buffers cannot adapt: pre_post is fixed.
//
// The policy chooses the parameters (pre-posted buffers per peer, the RNR
// retry count and timer); the ib BTL runs them. Pure logic: no I/O, no
// goroutines, no clock.
package ibhardware

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/flowcontrol/internal/ibcredit"
)

// Name is the component name.
const Name = "ib_hardware"

// Policy is the hardware scheme.
type Policy struct {
	// PrePost is the number of receive buffers posted per peer on each
	// per-peer queue; 0 keeps the receive layout's count.
	PrePost int
	// RNRRetry is the RNR retry count; 7 retries forever.
	RNRRetry int
	// MinRNRTimer is how long a NAKed sender waits; 0 keeps the BTL's.
	MinRNRTimer time.Duration
}

// Setup asks for no credit accounting.
func (p *Policy) Setup(info core.FlowInfo) (core.FlowSetup, error) {
	if err := ibcredit.CheckResource(Name, info); err != nil {
		return core.FlowSetup{}, err
	}
	if p.PrePost < 0 || p.RNRRetry < 1 || p.RNRRetry > 7 || p.MinRNRTimer < 0 {
		return core.FlowSetup{}, fmt.Errorf("%s: pre_post %d, rnr_retry %d, min_rnr_timer %v: want pre_post >= 0, rnr_retry in [1, 7]", Name, p.PrePost, p.RNRRetry, p.MinRNRTimer)
	}
	return core.FlowSetup{Scheme: core.FlowNone, Quota: p.PrePost, MaxQuota: p.PrePost, RNRRetry: p.RNRRetry, MinRNRTimer: p.MinRNRTimer}, nil
}

// Observe has nothing to decide: the hardware tells software nothing.
func (p *Policy) Observe(_ []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision { return out }

// Params is the schema of the policy's HCL block.
var Params = []core.Param{
	ibcredit.PrePostParam,
	{Name: "rnr_retry", Type: core.ParamInt, Default: fmt.Sprint(ibcredit.InfiniteRNRRetry), Min: "1", Max: "7",
		Doc: "RNR NAK retries before the connection fails; 7 retries forever, as seed 000 §4.1 requires for reliability"},
	{Name: "min_rnr_timer", Type: core.ParamDuration, Default: "0s", Min: "0s",
		Doc: "how long an RNR-NAKed sender waits before it retries; 0 keeps the btl block's min_rnr_timer"},
}

// New builds the policy from its parameters.
func New(p core.Params) *Policy {
	return &Policy{PrePost: p.Int("pre_post"), RNRRetry: p.Int("rnr_retry"), MinRNRTimer: p.Duration("min_rnr_timer")}
}

func init() {
	ibcredit.Register(Name,
		"InfiniBand hardware-based flow control (seed 000 §4.1): no credits, every send posted at once; "+
			"the receiver's RNR NAK and infinite retry hold the sender back.",
		Params, New)
}
