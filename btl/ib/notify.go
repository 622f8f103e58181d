package ib

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// completions are the module's completion queue and its channel (seed 004
// §4.3): Progress polls the CQ into wc; Arm asks for an event at the next
// solicited completion, stashing what it finds already there for the next
// Progress.
type completions struct {
	ch     verbs.CompChannel
	q      verbs.CQ
	wc     [64]verbs.WC
	stash  [64]verbs.WC
	nstash int
	armed  bool
	// armSolicitedOnly: the CQ is armed for solicited events only.
	armSolicitedOnly bool
	// solicitedOps are RDMA operations in flight whose completion must
	// wake the notifier: verbs raise solicited events only for receives.
	// The send side counts them.
	solicitedOps int
}

// Arm requests one notification at the next solicited event: a frame sent
// with SendSolicited arriving, or — while a solicited RDMA operation is in
// flight — any completion, since verbs raise solicited events only for
// receives. Completions that are already waiting wake the notifier at once.
func (m *module) Arm() {
	if !m.closed {
		m.cq.arm(m.log)
	}
}

// Notify is the channel notifications arrive on.
func (m *module) Notify() <-chan struct{} { return m.cq.ch.Ready() }

func (c *completions) arm(log zerolog.Logger) {
	if c.nstash == 0 {
		k, _ := c.q.Poll(c.stash[:])
		c.nstash = k
	}
	if c.nstash > 0 {
		c.ch.Wake()
		return
	}
	if err := c.q.ReqNotify(c.solicitedOps == 0); err != nil {
		log.Warn().Err(err).Msg("arm CQ")
		return
	}
	c.armed, c.armSolicitedOnly = true, c.solicitedOps == 0
	// Arm, then look again: a completion that came between the poll and
	// the arming raised no event.
	if k, _ := c.q.Poll(c.stash[:]); k > 0 {
		c.nstash = k
		c.ch.Wake()
	}
}

// beforeSolicited readies the CQ for a solicited RDMA operation about to
// be posted: verbs raise solicited events for receives only, so a CQ
// armed for them would sleep through its completion. Re-armed before the
// post, not after: the operation may complete (on the device's own
// thread) before PostSend returns, and an arm after its completion waits
// for the next one — a progress thread asleep on the CQ then never woke
// (the conformance suite's solicited RDMA notification, 3 in 360 race
// runs).
func (c *completions) beforeSolicited() error {
	if !c.armed || !c.armSolicitedOnly {
		return nil
	}
	c.armSolicitedOnly = false
	return c.q.ReqNotify(false)
}

// stashed says whether Arm armed the CQ or stashed completions since the
// last Progress.
func (c *completions) stashed() bool { return c.armed || c.nstash > 0 }

// taken returns the completions Arm stashed, to be handled before the CQ
// is polled again, and acknowledges the channel's events if it was armed.
func (c *completions) taken() []verbs.WC {
	if c.armed {
		c.armed = false
		c.ackEvents()
	}
	k := c.nstash
	c.nstash = 0
	return c.stash[:k]
}

// poll takes what completed from the CQ.
func (c *completions) poll() ([]verbs.WC, error) {
	k, err := c.q.Poll(c.wc[:])
	return c.wc[:k], err
}

// ackEvents acknowledges the channel's events.
func (c *completions) ackEvents() {
	for {
		cq, ok := c.ch.GetEvent()
		if !ok {
			return
		}
		cq.AckEvents(1)
	}
}

// open makes the completion channel and a CQ of n entries on it.
func (c *completions) open(h *hca, n int) (err error) {
	if c.ch, err = h.dev.CreateCompChannel(); err != nil {
		return err
	}
	if c.q, err = h.dev.CreateCQ(n, c.ch); err != nil {
		return fmt.Errorf("CQ of %d: %w", n, err)
	}
	return nil
}

// close destroys the CQ and its channel.
func (c *completions) close() {
	if c.q != nil {
		c.q.Destroy()
	}
	if c.ch != nil {
		c.ch.Destroy()
	}
}
