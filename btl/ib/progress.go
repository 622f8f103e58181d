package ib

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// The progress engine: Progress drains the CQ and hands each completion to
// what it completes — a received frame to its handler and then to the
// credit engine, a send buffer back to its free list, an RDMA operation to
// its requester, a connection message to the CM — and runs housekeeping
// every core.PolicyPollInterval.

// Progress polls the CQ and handles what completed: frames go to their
// handlers (which may send), send buffers return to their free lists,
// RDMA operations complete. It never blocks.
func (m *module) Progress() int {
	if m.closed || m.depth > 0 {
		return 0
	}
	m.depth++
	m.credit.gen++
	n := 0
	if m.cq.stashed() {
		stash := m.cq.taken()
		for i := 0; i < len(stash) && !m.closed; i++ {
			m.complete(&stash[i])
		}
		n += len(stash)
	}
	wc, err := m.cq.poll()
	if err != nil {
		m.fatal(err)
	}
	for i := 0; i < len(wc) && !m.closed; i++ {
		m.complete(&wc[i])
	}
	n += len(wc)
	if len(m.credit.creditDue) > 0 && !m.closed {
		m.credit.returnCredits()
	}
	if len(m.tx.waiting) > 0 && !m.closed {
		m.tx.sendWaiting()
	}
	if !m.closed {
		m.credit.flow.Flush()
	}
	if !m.closed {
		if now := m.clock.Now(); now >= m.nextHK {
			m.housekeeping(now)
		}
	}
	if len(m.peers.lost) > 0 && !m.closed && !m.draining {
		n += m.peers.reportLost()
	}
	m.depth--
	return n
}

// complete handles one work completion.
func (m *module) complete(wc *verbs.WC) {
	idx := int(wc.WRID & wridIdx)
	switch wc.WRID & wridKind {
	case wridRecv:
		m.received(wc, idx)
	case wridSend:
		if e := m.tx.sent(idx); e != nil && wc.Status != verbs.WCSuccess {
			e.failure("send", wc.Status)
		}
	case wridRDMA:
		s := m.tx.rdmaDone(idx)
		var err error
		if wc.Status != verbs.WCSuccess {
			what := "RDMA read"
			if s.put {
				what = "RDMA write"
			}
			err = s.ep.failure(what, wc.Status)
		}
		s.op.Done.RDMADone(s.op, err)
	case wridCM:
		m.cm.complete(wc)
	}
}

// received handles a receive completion: check, deliver, repost, owe.
func (m *module) received(wc *verbs.WC, idx int) {
	b := m.rx.bufs[idx]
	q := m.rx.queues[b.queue]
	e := b.ep
	if e == nil {
		e = m.peers.byQPN[wc.QPN]
	}
	if q.shared {
		q.posted--
	}
	if wc.Status != verbs.WCSuccess {
		m.rx.flushed(wc, b, idx, e, m.closed)
		return
	}
	if e == nil || e.state == epFailed {
		m.rx.drop(b, idx, e, nil)
		return
	}
	frame := b.mem[:wc.ByteLen]
	h := &m.rx.hdr
	if err := h.Decode(frame, m.rx.limits); err != nil || int(h.Src) != e.rank || int(h.Length) != len(frame)-core.HeaderSize {
		if err == nil {
			err = fmt.Errorf("%w: source %d, %d payload bytes in a %d-byte frame", core.ErrBadFrame, h.Src, h.Length, len(frame))
		}
		m.rx.drop(b, idx, e, err)
		return
	}
	q.util.Observe(float64(wc.ByteLen) / float64(q.spec.BufSize))
	m.rx.recvSize.Observe(float64(wc.ByteLen))
	m.rx.framesRecv.Inc()
	m.rx.bytesRecv.Add(int64(wc.ByteLen))
	if e.state == epWaitRTU {
		m.cm.established(e)
	}
	e.rxFrames++
	if h.Credits > 0 && m.credit.fc.credits {
		if ci := m.credit.carry[b.queue]; ci >= 0 {
			m.credit.grant(e, ci, int(h.Credits))
		}
	}
	if m.draining {
		// Closing (goodbye): the frame's credits count — frames of ours
		// may wait for them — and nothing else does; the PML is gone, and
		// its buffer is not reposted nor its credit returned.
		return
	}
	if h.Flags&core.FlagBacklog != 0 {
		m.credit.backlogIn(e, b.queue)
	}
	if h.Type != core.TypeCredit {
		if err := m.rx.handlers.Dispatch(h, frame[core.HeaderSize:]); err != nil {
			m.rx.badFrames.Inc()
			e.fail(err)
		}
	}
	if m.closed {
		return
	}
	if q.shared {
		m.rx.repost(b, idx, nil)
		return
	}
	if e.state == epFailed {
		return
	}
	m.credit.reclaim(e, b, idx, h.Type != core.TypeCredit)
}

// housekeeping runs every PolicyPollInterval: async events, the policy,
// connection timers, device counters.
func (m *module) housekeeping(now time.Duration) {
	m.nextHK = now + core.PolicyPollInterval
	for {
		ev, ok := m.h.dev.PollAsyncEvent()
		if !ok {
			break
		}
		m.asyncEvent(ev)
	}
	if len(m.peers.erroring) > 0 {
		m.peers.failErroring(now)
	}
	m.rx.policy.Tick(now)
	if m.credit.fc.dynamic {
		m.credit.idleReports(now)
	}
	m.credit.flow.Tick(now)
	if len(m.cm.connecting) > 0 {
		m.cm.timers(now)
	}
	if m.dev != nil {
		s := m.h.soft.Stats()
		m.dev.rnrSent.Set(s.RNRNaksSent)
		m.dev.rnrRecv.Set(s.RNRNaksReceived)
		m.dev.retries.Set(s.Retries)
		m.dev.bytesSent.Set(s.BytesSent)
		m.dev.bytesRecv.Set(s.BytesReceived)
		m.dev.reads.Set(s.ReadsOutstanding)
		m.dev.nic.Set(s.NICEngagements)
		m.dev.rejected.Set(s.LinksRejected)
		m.dev.foreign.Set(s.ForeignPackets)
		m.dev.writes.Set(s.Writes)
		m.dev.wireReads.Set(s.Reads)
		m.dev.emptyReads.Set(s.EmptyReads)
		m.dev.epolls.Set(s.Epolls)
		m.dev.staged.Set(s.StagedBytes)
		m.dev.nicWakeups.Set(s.NICWakeups)
		m.dev.blocked.Set(s.WritesBlocked)
		m.dev.acks.Set(s.AcksSent)
		m.dev.acksPiggybacked.Set(s.AcksPiggybacked)
		m.dev.idleChecks.Set(s.NICIdleChecks)
		if s.LinksRejected > 0 && m.h.noteRejected(s.LinksRejected) {
			m.log.Warn().Int64("links_rejected", s.LinksRejected).Err(m.h.soft.LastRejection()).
				Msg("rejected connections that did not prove they belong to the job")
		}
		for _, e := range m.peers.made {
			if e.qps != nil {
				e.st.rnr.Set(rnrNaks(e.qps))
			}
		}
	}
}

// asyncEvent handles an asynchronous event of the device. Modules share
// a device, so an event about another module's objects is passed on.
func (m *module) asyncEvent(ev verbs.AsyncEvent) {
	switch ev.Type {
	case verbs.EventSRQLimitReached:
		for _, x := range m.siblings() {
			x.rx.onLimit(ev.SRQ)
		}
	case verbs.EventQPFatal, verbs.EventQPAccessErr, verbs.EventQPReqErr:
		for _, x := range m.siblings() {
			if e := x.peers.byQPN[ev.QPN]; e != nil {
				e.fail(fmt.Errorf("QP %#x: %v", ev.QPN, ev.Type))
			}
		}
	case verbs.EventQPLastWQEReached:
		// A consequence, not a cause: an SRQ-attached QP entered the error
		// state, and the completion that says why may still be on its way
		// to the CQ. Wait one housekeeping interval for it.
		for _, x := range m.siblings() {
			if e := x.peers.byQPN[ev.QPN]; e != nil && e.state != epFailed && e.erroring == nil {
				e.erroring, e.errSince = fmt.Errorf("QP %#x: %v", ev.QPN, ev.Type), m.clock.Now()
				x.peers.erroring = append(x.peers.erroring, e)
			}
		}
	case verbs.EventPortErr:
		for _, x := range m.siblings() {
			if x.port == ev.Port {
				for _, e := range x.peers.eps {
					if e != nil && e.state != epIdle {
						e.fail(fmt.Errorf("port %d: %v", ev.Port, ev.Type))
					}
				}
			}
		}
	case verbs.EventCQErr, verbs.EventDeviceFatal:
		for _, x := range m.siblings() {
			x.fatal(fmt.Errorf("%v", ev.Type))
		}
	}
}
