package ib

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

type epState uint8

const (
	epIdle       epState = iota // nothing yet
	epConnecting                // REQ sent, waiting for REP
	epWaitRTU                   // accepted, waiting for RTU or a first frame
	epConnected
	epFailed
)

// Errors of the send path, made once so that pushing back allocates
// nothing. Each wraps core.ErrNoResources: the PML keeps the frame and
// tries again after Progress.
var (
	errNoSendBuf  = fmt.Errorf("ib: send buffers of this size exhausted: %w", core.ErrNoResources)
	errNoCredit   = fmt.Errorf("ib: no credit on the peer's per-peer queue: %w", core.ErrNoResources)
	errPending    = fmt.Errorf("ib: sends to the peer's shared queue at their bound: %w", core.ErrNoResources)
	errConnecting = fmt.Errorf("ib: connection being set up: %w", core.ErrNoResources)
	errSQFull     = fmt.Errorf("ib: send queue full: %w", core.ErrNoResources)
	errClosed     = fmt.Errorf("ib: module: %w", core.ErrClosed)
)

// endpoint is one peer: a subchannel made of one RC QP per receive queue
// (seed 001 §4.2: a subchannel is an RC connection; several QPs over one
// port pair are still one subchannel when they serve one set of queues).
type endpoint struct {
	m     *module
	rank  int
	state epState
	err   error
	qps   []verbs.QP

	conn     connState // the connection manager's (cm.go)
	cred     []credits // per queue (per-peer queues only)
	tx       peerSends // the send side's: frames outstanding and waiting
	st       peerStats
	creditIn bool   // on m.credit.creditDue
	dueGen   uint64 // the Progress that found credits due

	// Quiet-peer reports to a dynamic policy.
	rxFrames, rxSeen     uint64
	quietSince, idleNext time.Duration

	// erroring is set when an async event said a QP entered the error
	// state (last WQE reached); the endpoint fails with the completion
	// error that says why, or with the event once a housekeeping
	// interval has passed without one.
	erroring error
	errSince time.Duration
}

// connState is an endpoint's part of its connection's setup and end: the
// peer's address and its address handle, the initial PSNs of our QPs and
// the numbers of the peer's, the epoch its request or the peer's set, the
// tries of the message it waits an answer to and when the next goes, the
// kinds queued for a send buffer, and whether it is on the connection
// manager's list and has said goodbye.
type connState struct {
	peer    *blob
	ah      verbs.AH
	psns    []uint32 // our QPs' initial PSNs
	remote  []uint32 // the peer's QPNs
	epoch   uint32
	tries   int
	next    time.Duration
	queued  uint8 // the kinds of connection message queued for the peer (1<<kind)
	saidBye bool  // a goodbye (cmDisc) went to the peer, ours or our answer to its
	watched bool  // on cm.connecting
}

func (m *module) ep(rank int) *endpoint {
	e := m.peers.eps[rank]
	if e == nil {
		e = &endpoint{m: m, rank: rank, cred: make([]credits, len(m.rx.queues)), tx: peerSends{out: make([]int, len(m.rx.queues))}}
		m.peers.eps[rank] = e
		// By rank, the order housekeeping has always walked the peers in.
		i, _ := slices.BinarySearchFunc(m.peers.made, rank, func(x *endpoint, r int) int { return x.rank - r })
		m.peers.statMu.Lock()
		m.peers.made = slices.Insert(m.peers.made, i, e)
		m.peers.statMu.Unlock()
	}
	return e
}

// Rank is the peer's rank.
func (e *endpoint) Rank() int { return e.rank }

// Send copies the frame into a registered send buffer of the smallest
// queue that holds it and posts it. It refuses with an error wrapping
// core.ErrNoResources when a per-peer queue has no credit (the frame waits
// in the PML's queue, the backlog of seed 000 §4.2), when a shared queue
// has its bound of sends outstanding, or when send buffers or the send
// queue run out. While the connection is set up (the first Send starts
// it), frames wait on the endpoint, up to a send queue's worth.
func (e *endpoint) Send(h core.Header, pre, data []byte, flags core.SendFlags) error {
	m := e.m
	err := e.usable()
	connecting := err == errConnecting
	if err != nil && !connecting {
		return err
	}
	n := core.HeaderSize + len(pre) + len(data)
	qi := m.tx.queueFor(n)
	if qi < 0 {
		return fmt.Errorf("ib %s: frame of %d payload bytes exceeds the %d-byte maximum", m.id, n-core.HeaderSize, m.rx.maxFrame-core.HeaderSize)
	}
	if connecting || len(e.tx.pending) > 0 {
		// While the connection is set up, frames wait on the endpoint, in
		// order, as on openib's pending list; beyond a send queue's worth
		// they are refused.
		if len(e.tx.pending) >= m.cfg.sendQueue {
			return errConnecting
		}
	} else if err := e.mayPost(qi, flags); err != nil {
		if err == errNoCredit {
			e.refused(qi)
		}
		return err
	}
	b := m.tx.get(qi)
	if b == nil {
		return m.tx.exhausted()
	}
	h.Length = uint32(n - core.HeaderSize)
	copy(b.mem[core.HeaderSize:], pre)
	copy(b.mem[core.HeaderSize+len(pre):], data)
	b.n, b.h, b.flags, b.ep = n, h, flags, e
	if connecting || len(e.tx.pending) > 0 {
		e.tx.pending = append(e.tx.pending, b)
		return nil
	}
	e.post(b)
	return nil
}

// sendPending posts the frames that waited for the connection, in order,
// as far as credits and the send queue allow; the rest go from later
// Progress calls.
func (e *endpoint) sendPending() {
	p := &e.tx
	k := 0
	for k < len(p.pending) && e.state == epConnected {
		b := p.pending[k]
		if err := e.mayPost(int(b.queue), b.flags); err != nil {
			if err == errNoCredit {
				e.refused(int(b.queue))
			}
			break
		}
		e.post(b)
		p.pending[k] = nil
		k++
	}
	p.pending = append(p.pending[:0], p.pending[k:]...)
}

// usable returns nil when the endpoint may carry traffic now. The first
// use of an idle endpoint starts its connection; until it is up, traffic
// is refused with ErrNoResources and retried.
func (e *endpoint) usable() error {
	m := e.m
	if m.closed {
		return errClosed
	}
	switch e.state {
	case epConnected:
		return nil
	case epFailed:
		return e.err
	case epIdle:
		m.cm.connect(e)
		if e.state == epFailed {
			return e.err
		}
	}
	return errConnecting
}

// mayPost says whether a frame may go on queue qi now: room in the QP's
// send queue and, unless the frame bypasses flow control, a credit on a
// per-peer queue under the credit schemes or room under the pending bound
// of a shared queue.
func (e *endpoint) mayPost(qi int, flags core.SendFlags) error {
	if err := e.m.tx.room(e, qi, flags); err != nil || flags&core.SendNoFlowControl != 0 {
		return err
	}
	if e.m.credit.counted[qi] && e.cred[qi].avail <= 0 {
		return errNoCredit
	}
	return nil
}

// post puts b on the wire with the credits owed to the peer and, if it
// waited in the backlog for a credit (released), the backlog bit.
func (e *endpoint) post(b *sendBuf) {
	m := e.m
	qi := b.queue
	h := &b.h
	if m.credit.fc.credits {
		if !m.rx.queues[qi].shared && h.Type != core.TypeCredit {
			e.cred[qi].spend()
			if b.flags&core.SendNoFlowControl == 0 {
				h.Flags |= e.released(int(qi), b.flags&core.SendBacklog != 0)
			}
		}
		if ci := m.credit.carry[qi]; ci >= 0 {
			h.Credits = e.cred[ci].take()
			if ci == m.rx.firstP {
				e.st.credits.Set(int64(e.cred[ci].avail))
			}
		}
	}
	if err := m.tx.post(e, b); err != nil {
		e.fail(fmt.Errorf("post send: %w", err))
	}
}

var _ core.Resources = (*endpoint)(nil)

// PreferRendezvous implements core.Resources: when the flow-control policy
// (or rndv_on_no_credit, without one) asks for it, a peer whose per-peer
// queue is out of credits gets small messages by rendezvous, so that the
// handshake brings credits back (seed 000 §4.2).
func (e *endpoint) PreferRendezvous() bool {
	m := e.m
	if !m.credit.fc.rndv || e.state != epConnected {
		return false
	}
	for i, q := range m.rx.queues {
		if !q.shared && e.cred[i].avail <= 0 {
			e.st.rndv.Inc()
			return true
		}
	}
	return false
}

// FragsInFlight implements core.Resources: the frames posted to the peer
// whose send has not completed, and those waiting for the connection.
func (e *endpoint) FragsInFlight() int { return e.tx.inFlight() }

// Replenished implements core.Resources: the module's count of send
// completions, credit returns and connections up, any of which may let a
// refused frame pass — send buffers and the send queue are the module's,
// and a count for every peer would be as cheap and tell no more.
func (e *endpoint) Replenished() uint64 {
	return e.m.replenished + e.m.credit.granted + e.m.tx.completed
}

// Disconnect implements core.Module: the connection manager tells rank
// that this rank dropped it (cmDrop), which makes it fail its endpoint
// and report this rank lost, and the endpoint fails here, its QPs to the
// error state, so that a peer whose datagram was lost meets the error at
// its next send. A peer never connected, or lost already, is left alone.
func (m *module) Disconnect(rank int, reason error) {
	if m.closed || rank < 0 || rank >= m.size || rank == m.rank {
		return
	}
	e := m.peers.eps[rank]
	if e == nil || e.state == epIdle || e.state == epFailed {
		return
	}
	m.cm.send(e, cmDrop)
	e.fail(fmt.Errorf("disconnected by this rank: %v", reason))
}

// sendCredits sends an explicit credit frame on queue qi, outside flow
// control (seed 000 §4.2's optimistic scheme). It reports false when it
// must be tried again later.
func (e *endpoint) sendCredits(qi int) bool {
	m := e.m
	if m.tx.room(e, qi, core.SendNoFlowControl) != nil {
		return false
	}
	b := m.tx.get(qi)
	if b == nil {
		return false
	}
	b.n, b.ep, b.flags = core.HeaderSize, e, core.SendNoFlowControl
	b.h = core.Header{Type: core.TypeCredit, Src: int32(m.rank)}
	m.credit.creditMsgs.Inc()
	e.st.creditMsgs.Inc()
	e.post(b)
	return true
}

// ---- failure ----

// fail marks the peer lost: later Sends return the error, everything in
// flight completes with it (the QPs go to ERR and flush), and the PML hears
// of it from the next Progress.
func (e *endpoint) fail(cause error) {
	if e.state == epFailed {
		return
	}
	m := e.m
	if m.draining && e.conn.saidBye {
		// We said goodbye and the connection went down before the
		// peer's answer arrived: the peer closed, as asked. Its answer
		// may still be on its way — a datagram, on softrc another link
		// when the two ends dialled each other at once.
		m.cm.closedByPeer(e)
		return
	}
	e.state = epFailed
	if errors.Is(cause, core.ErrUnreachable) {
		e.err = fmt.Errorf("ib %s: peer %d: %w", m.id, e.rank, cause)
	} else {
		e.err = fmt.Errorf("ib %s: peer %d: %w: %v", m.id, e.rank, core.ErrPeerLost, cause)
	}
	m.peersLost.Inc()
	m.tx.drop(e)
	m.log.Warn().Int("peer", e.rank).Err(e.err).Msg("peer lost")
	for _, qp := range e.qps {
		qp.Modify(&verbs.QPAttr{State: verbs.QPErr}, verbs.QPAttrState)
	}
	m.peers.lost = append(m.peers.lost, e)
}

// failure turns an error completion into the error its operation reports.
func (e *endpoint) failure(what string, st verbs.WCStatus) error {
	if e.state != epFailed {
		if st == verbs.WCWRFlushErr {
			// The first sign of a connection gone down is often a receive
			// flushed out of a QP the HCA moved to ERR.
			e.fail(fmt.Errorf("the connection went down (%s: %v)", what, st))
		} else {
			e.fail(fmt.Errorf("%s: %v", what, st))
		}
	}
	return e.err
}
