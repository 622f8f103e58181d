// Package ibstatic (directory ib_static) is the user-level static flow control of seed 000 §4.2
// for the ib BTL: credits, one per receive buffer a peer pre-posts.
//
// At wire-up a receiver posts pre_post buffers for each peer and the
// sender starts with as many credits; each frame that consumes a buffer
// spends one. With none left, the frame waits in the backlog, a FIFO
// served in order when credits return. The receiver reposts a buffer as
// soon as it has handled its frame and owes the sender a credit; owed
// credits ride in the header of every frame going back (piggybacking),
// and when credit_threshold of them are owed (seed 000: 5) and no frame is
// going that way, an explicit credit message carries them. Explicit credit
// messages bypass flow control — the optimistic scheme: they are posted at
// once even without a credit, and the device's RNR retry (7, forever)
// guarantees them, so no deadlock — and, while a peer is out of credits,
// small messages go by rendezvous when rndv_on_no_credit is set: the
// handshake's replies bring credits back.
//
// The number of buffers never changes ("static", §4): what this policy
// decides it decides at Setup. The mechanism — counters, backlog,
// piggybacking, explicit credits — runs in btl/ib (credits.go) and checks
// what it is given. Pure logic: no I/O, no goroutines, no clock.
package ibstatic

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/flowcontrol/internal/ibcredit"
)

// Name is the component name.
const Name = "ib_static"

// Policy is the static scheme.
type Policy struct {
	// PrePost is the number of buffers per peer on each per-peer queue
	// (the credits a sender starts with); 0 keeps the layout's count.
	PrePost int
	// Threshold is the explicit-credit threshold (seed 000: 5).
	Threshold int
	// Rndv sends small messages by rendezvous while out of credits.
	Rndv bool
}

// Setup asks for credits with a fixed number of buffers.
func (p *Policy) Setup(info core.FlowInfo) (core.FlowSetup, error) {
	if err := ibcredit.CheckResource(Name, info); err != nil {
		return core.FlowSetup{}, err
	}
	if p.PrePost < 0 || p.Threshold < 1 {
		return core.FlowSetup{}, fmt.Errorf("%s: pre_post %d, credit_threshold %d: want pre_post >= 0 and a threshold of at least 1", Name, p.PrePost, p.Threshold)
	}
	return ibcredit.Credits(p.PrePost, p.PrePost, p.Threshold, p.Rndv), nil
}

// Observe has nothing to adjust.
func (p *Policy) Observe(_ []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision { return out }

// Params is the schema of the policy's HCL block.
var Params = []core.Param{
	ibcredit.PrePostParam,
	ibcredit.ThresholdParam,
	ibcredit.RndvParam,
}

// New builds the policy from its parameters.
func New(p core.Params) *Policy {
	return &Policy{PrePost: p.Int("pre_post"), Threshold: p.Int("credit_threshold"), Rndv: p.Bool("rndv_on_no_credit")}
}

func init() {
	ibcredit.Register(Name,
		"InfiniBand user-level static flow control (seed 000 §4.2): credits = pre-posted buffers, a backlog FIFO, "+
			"piggybacked credits, optimistic explicit credit messages past a threshold, rendezvous while out of credits.",
		Params, New)
}
