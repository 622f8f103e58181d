// Package none is the flow-control policy that runs no software flow
// control at all. On EXTOLL it shows what the hardware does (seed 003 §2,
// §4): packets go straight into the receiver's mailbox and, when it is
// full, back-pressure blocks the sender until the receiver frees a slot —
// a fast sender and a slow receiver stall, and two processes blocked on
// each other's full mailboxes never recover. The transport bounds such a
// wait and reports it as core.ErrStalled. With a mailbox large enough for
// the traffic (the reference runs of seed 003 §5.3) it is the lower bound
// of any flow control's cost. On InfiniBand it is the hardware scheme of
// seed 000 §4.1 (RNR NAK and retry).
//
// The policy is pure logic: no I/O, no goroutines, no clock.
package none

import "github.com/gobtl/gobtl/core"

// Name is the component name.
const Name = "none"

// Policy turns flow control off.
type Policy struct{}

// Setup asks for no flow control.
func (Policy) Setup(core.FlowInfo) (core.FlowSetup, error) {
	return core.FlowSetup{Scheme: core.FlowNone}, nil
}

// Observe has nothing to decide.
func (Policy) Observe(_ []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision { return out }

func init() {
	core.Register(&core.Component{
		Kind: core.KindFlowControl,
		Name: Name,
		Doc: "No software flow control: what the hardware does. On EXTOLL a full mailbox blocks the sender " +
			"(bounded by the BTL's stall_timeout, then core.ErrStalled); on InfiniBand RNR NAK and retry.",
		NewPolicy: func(core.Params) (any, error) { return Policy{}, nil },
	})
}
