package ib

import "github.com/gobtl/gobtl/btl/ib/verbs"

// completions are the module's completion queue and its channel (seed 004
// §4.3): Progress polls the CQ into wc; Arm asks for an event at the next
// solicited completion, stashing what it finds already there for the next
// Progress.
type completions struct {
	ch     verbs.CompChannel
	cq     verbs.CQ
	wc     [64]verbs.WC
	stash  [64]verbs.WC
	nstash int
	armed  bool
	// armSolicitedOnly: the CQ is armed for solicited events only.
	armSolicitedOnly bool
	// solicitedOps are RDMA operations in flight whose completion must
	// wake the notifier: verbs raise solicited events only for receives.
	solicitedOps int
}

// Arm requests one notification at the next solicited event: a frame sent
// with SendSolicited arriving, or — while a solicited RDMA operation is in
// flight — any completion, since verbs raise solicited events only for
// receives. Completions that are already waiting wake the notifier at once.
func (m *module) Arm() {
	if m.closed {
		return
	}
	if m.nstash == 0 {
		k, _ := m.cq.Poll(m.stash[:])
		m.nstash = k
	}
	if m.nstash > 0 {
		m.ch.Wake()
		return
	}
	if err := m.cq.ReqNotify(m.solicitedOps == 0); err != nil {
		m.log.Warn().Err(err).Msg("arm CQ")
		return
	}
	m.armed, m.armSolicitedOnly = true, m.solicitedOps == 0
	// Arm, then look again: a completion that came between the poll and
	// the arming raised no event.
	if k, _ := m.cq.Poll(m.stash[:]); k > 0 {
		m.nstash = k
		m.ch.Wake()
	}
}

// Notify is the channel notifications arrive on.
func (m *module) Notify() <-chan struct{} { return m.ch.Ready() }

// ackEvents acknowledges the channel's events (called from Progress when
// armed).
func (m *module) ackEvents() {
	for {
		cq, ok := m.ch.GetEvent()
		if !ok {
			return
		}
		cq.AckEvents(1)
	}
}
