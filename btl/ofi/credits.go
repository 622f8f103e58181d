package ofi

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// Credits: the user-level static scheme of seed 000 §4.2 on every
// receive class. A sender starts with the window the receiver published
// for the class (its buffers per peer, or its max_pending on a shared
// class) and spends one per frame; with none left the frame is refused
// with core.ErrNoResources and waits in the PML's backlog. The receiver
// reposts a buffer as soon as its frame is handled and owes the sender a
// credit for it; owed credits ride back in the header of every frame of
// the same class going the other way, and once the class's threshold is
// owed and no frame has carried them by the next Progress, an explicit
// credit message (a control message, one count per class) goes. Credit
// messages are optimistic: they spend no credit and are owed none, so
// two sides out of credits cannot deadlock. A class whose window is 0
// (the hardware scheme, core.FlowNone) counts nothing: the provider holds
// a sender back, and keeps what finds no buffer. A frame sent with
// core.SendNoFlowControl carries the no-credit bit in its tag and is owed
// nothing either.
//
// The backlog bit (core.FlagBacklog) marks the frame that ends a stall
// and every frame the PML sends from its backlog behind it, so that a
// receiver sees each message that waited (seed 000 §4.3).

// credit is a sender's state for one class of one peer.
type credit struct {
	counted  bool // the receiver counts this class's credits
	avail    int
	held     bool // a frame was refused and has not gone yet
	draining bool // a stall ended; frames from the backlog still come
}

// flag is the header flag of a frame going now: queued says it comes
// from the PML's backlog.
func (c *credit) flag(queued bool) core.Flag {
	if c.held || queued && c.draining {
		return core.FlagBacklog
	}
	return 0
}

// commit records that a frame went; it reports whether it carried the
// backlog bit.
func (c *credit) commit(queued bool) bool {
	switch {
	case c.held:
		c.held, c.draining = false, true
		return true
	case queued && c.draining:
		return true
	}
	c.draining = false
	return false
}

// flowCfg is what a flow-control policy asks of the module: credits on
// every class (the default, with the layout's numbers), or none, and the
// per-peer windows and threshold it sets.
type flowCfg struct {
	none      bool // core.FlowNone: no credits; the provider holds frames back
	quota     int  // credits per peer on per-peer classes; 0: the layout's count
	threshold int  // explicit credits once this many are owed; 0: the layout's
	rndv      bool // rendezvous while a per-peer class is out of credits
}

// resolveFlow asks the job's flow-control policy, if any, for its scheme
// over posted buffers. The static schemes run here; a policy that grows
// quotas (dynamic) or counts slots is refused by name: this transport
// does not offer them yet. Rendezvous while out of credits (seed 000
// §4.2) is the policy's to ask for: the endpoints then report
// PreferRendezvous (core.Resources) while a per-peer class of theirs has
// no credit.
func resolveFlow(env core.BTLEnv, firstBuf int) (flowCfg, error) {
	if env.FlowControl == nil {
		return flowCfg{}, nil
	}
	s, err := env.FlowControl.Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: env.Boot.Size(),
		Senders: env.Boot.Size() - 1, BufferSize: firstBuf})
	if err != nil {
		return flowCfg{}, fmt.Errorf("ofi: flow-control policy: %w", err)
	}
	switch {
	case s.CreditSlots != 0 || s.DynamicRegion:
		return flowCfg{}, fmt.Errorf("ofi: the flow-control policy asks for credit slots or a dynamic region, which a slot pool has: it is not a policy for posted buffers")
	case s.MaxQuota > s.Quota:
		return flowCfg{}, fmt.Errorf("ofi: the flow-control policy grows quotas (dynamic, seed 000 §4.3): ofi runs the static schemes only")
	case s.Quota < 0 || s.Quota > 0xffff || s.CreditThreshold < 0:
		return flowCfg{}, fmt.Errorf("ofi: flow-control policy: quota %d, threshold %d out of range", s.Quota, s.CreditThreshold)
	}
	switch s.Scheme {
	case core.FlowNone:
		if s.RndvOnNoCredit {
			return flowCfg{}, fmt.Errorf("ofi: the hardware scheme counts no credits: no rendezvous for lack of them")
		}
		return flowCfg{none: true}, nil
	case core.FlowCredits:
		return flowCfg{quota: s.Quota, threshold: s.CreditThreshold, rndv: s.RndvOnNoCredit}, nil
	}
	return flowCfg{}, fmt.Errorf("ofi: unknown flow-control scheme %d", s.Scheme)
}

// apply sets a class's window and threshold as the policy asks.
func (f flowCfg) apply(window, low int, shared bool) (int, int) {
	switch {
	case f.none:
		return 0, 0
	case f.quota > 0 && !shared:
		window = f.quota
	}
	if f.threshold > 0 {
		low = f.threshold
	}
	return window, max(min(low, window), 1)
}
