package softrc

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// grhSize is the Global Route Header at the start of every UD receive
// buffer.
const grhSize = 40

// begin handles a packet header: it decides where the payload goes (a
// receive WQE, registered memory, or nowhere) and does what must happen
// before the payload is placed: sequence checks, RNR NAKs, key checks.
func (d *Device) begin(l *link, now int64) {
	h := &l.h
	if l.auth != authDone {
		d.beginHandshake(l, now)
		return
	}
	if h.op == opHello || h.op == opChallenge || h.op == opProof {
		d.linkFailed(l, fmt.Errorf("handshake opcode %d on an authenticated link", h.op), now)
		return
	}
	l.discard = true
	q := d.qps[h.dqpn]
	if q == nil || q.destroyed {
		d.stats.Drops++
		return
	}
	if q.typ == verbs.QPTypeUD {
		d.beginUD(l, q, now)
		return
	}
	if q.state != verbs.QPRTR && q.state != verbs.QPRTS {
		// A QP that is not ready to receive drops the packet; the
		// requester's ACK timeout retries it.
		d.stats.Drops++
		return
	}
	// Only the QP's peer speaks to it: a packet from any other port or QP
	// — a stale connection, a misaddressed member — must neither move its
	// sequence nor tie its fate to another link. The link is checked when
	// it changes, so a packet on the QP's own link costs a pointer and a
	// QP number compare.
	if q.in != l {
		if l.port != q.port || l.peerGID != q.ah.DGID || l.peerLID != q.ah.DLID {
			d.stats.ForeignPackets++
			return
		}
		q.in = l
	}
	if h.sqpn != q.dqpn {
		d.stats.ForeignPackets++
		return
	}
	if l.spare {
		// The peer's QP sends here: polls must read this link.
		l.spare = false
	}
	if h.flags&pktAckValid != 0 {
		q.onAck(h.ack, now)
	}
	switch h.op {
	case opAck:
		q.onAck(h.psn, now)
		return
	case opNak:
		q.onNak(h, now)
		return
	case opReadResp:
		d.beginReadResp(l, q, now)
		return
	case opSend, opSendImm, opWrite, opWriteImm, opReadReq:
		d.beginRequest(l, q, now)
		return
	}
	d.linkFailed(l, fmt.Errorf("opcode %d on an RC QP", h.op), now)
}

// beginReadResp places a read response's payload into the segments of the
// RDMA read it answers; a response to no read outstanding is dropped, and
// one of another length fails the read.
func (d *Device) beginReadResp(l *link, q *qp, now int64) {
	h := &l.h
	i, ok := q.find(h.psn)
	if !ok {
		d.stats.Drops++
		return
	}
	w := q.slot(i)
	if w.op != verbs.OpRDMARead || w.done {
		d.stats.Drops++
		return
	}
	if h.length != w.length {
		q.fail(w, verbs.WCBadRespErr, now)
		return
	}
	l.discard = false
	l.setSink(nil, w.segs)
	l.act = rxAction{kind: actReadResp, q: q, idx: i, psn: w.psn}
}

// beginRequest handles a request on an RC QP: in sequence, a send takes
// a receive WQE (or is RNR NAKed), a write checks its key and region, a
// read is served; a duplicate is acknowledged (or its read served) again,
// and a packet out of sequence is dropped.
func (d *Device) beginRequest(l *link, q *qp, now int64) {
	h := &l.h
	if h.psn != q.epsn {
		if psnBefore(h.psn, q.epsn) {
			// A duplicate, retransmitted after an ACK timeout: reads are
			// served again, everything else is acknowledged again.
			if h.op == opReadReq {
				q.serveRead(h, true, now)
				return
			}
			l.act = rxAction{kind: actDup, q: q}
			return
		}
		// Out of sequence: packets sent behind one we NAKed. The requester
		// goes back and sends them again.
		d.stats.Drops++
		return
	}
	switch h.op {
	case opSend, opSendImm:
		rw, ok := q.takeRecv()
		if !ok {
			q.rnrNak(h.psn, now)
			return
		}
		if int(h.length) > rw.length {
			q.rcq.push(verbs.WC{WRID: rw.wrid, Status: verbs.WCLocLenErr, Opcode: verbs.WCRecv, ByteLen: h.length, QPN: q.qpn, SrcQP: h.sqpn}, false)
			q.sendNak(h.psn, nakInvReq, 0, now)
			q.toErr(now)
			return
		}
		l.discard = false
		l.setSink(nil, rw.segs)
		l.act = rxAction{kind: actRecv, q: q, wrid: rw.wrid}
	case opWrite, opWriteImm:
		b, ok := q.remote(h.raddr, h.key, uint64(h.length), verbs.AccessRemoteWrite)
		if !ok {
			q.sendNak(h.psn, nakRemAccess, 0, now)
			q.toErr(now)
			d.raise(verbs.AsyncEvent{Type: verbs.EventQPAccessErr, QPN: q.qpn})
			return
		}
		act := rxAction{kind: actWrite, q: q}
		if h.op == opWriteImm {
			rw, ok := q.takeRecv()
			if !ok {
				q.rnrNak(h.psn, now)
				return
			}
			act.kind, act.wrid = actRecv, rw.wrid
		}
		l.discard = false
		l.setSink(b, nil)
		l.act = act
	case opReadReq:
		q.serveRead(h, false, now)
	}
}

// rnrNak answers a request that found no receive WQE: Receiver Not Ready,
// come back after my min_rnr_timer (seed 000 §2, §4.1).
func (q *qp) rnrNak(psn uint32, now int64) {
	q.d.stats.RNRNaksSent++
	q.sendNak(psn, nakRNR, q.minRNR, now)
	q.flush(now)
}

// remote checks an RDMA target against the key, the region, the PD and
// the access flags of both the region and the QP.
func (q *qp) remote(addr uint64, key uint32, n uint64, access verbs.Access) ([]byte, bool) {
	m := q.d.mrs[key]
	if m == nil || m.dead || m.pd != q.pd || m.access&access == 0 || q.access&access == 0 {
		return nil, false
	}
	return m.slice(addr, n)
}

// serveRead answers an RDMA read request from registered memory. The
// response is queued on the wire referencing the memory in place; the
// process is not involved.
func (q *qp) serveRead(h *header, dup bool, now int64) {
	if !dup && q.destReads >= q.maxDestRd {
		q.sendNak(h.psn, nakInvReq, 0, now)
		q.toErr(now)
		return
	}
	b, ok := q.remote(h.raddr, h.key, uint64(h.aux), verbs.AccessRemoteRead)
	if !ok {
		q.sendNak(h.psn, nakRemAccess, 0, now)
		q.toErr(now)
		q.d.raise(verbs.AsyncEvent{Type: verbs.EventQPAccessErr, QPN: q.qpn})
		return
	}
	if q.out == nil || q.out.dead {
		return
	}
	if !dup {
		q.epsn++
		q.destReads++
	}
	// The response acknowledges everything before it.
	q.ackPending, q.unacked, q.ackDeadline = false, 0, 0
	resp := header{op: opReadResp, dqpn: q.dqpn, sqpn: q.qpn, psn: h.psn, length: h.aux}
	q.out.enqueue(&resp, nil, [][]byte{b}, q, itemReadResp, 0, now)
}

// beginUD handles a datagram on a UD QP: it takes a receive WQE and
// writes the GRH before the payload, or drops the datagram (UD has no
// RNR).
func (d *Device) beginUD(l *link, q *qp, now int64) {
	h := &l.h
	if h.op != opUD && h.op != opUDImm {
		d.linkFailed(l, fmt.Errorf("opcode %d on a UD QP", h.op), now)
		return
	}
	if (q.state != verbs.QPRTR && q.state != verbs.QPRTS) || h.key != q.qkey {
		d.stats.Drops++
		return
	}
	rw, ok := q.takeRecv()
	if !ok {
		// UD has no RNR: the datagram is lost.
		d.stats.Drops++
		return
	}
	if len(rw.segs) == 0 || len(rw.segs[0]) < grhSize || int(h.length)+grhSize > rw.length {
		q.rcq.push(verbs.WC{WRID: rw.wrid, Status: verbs.WCLocLenErr, Opcode: verbs.WCRecv, QPN: q.qpn, SrcQP: h.sqpn, SLID: l.peerLID}, false)
		return
	}
	grh := rw.segs[0][:grhSize]
	clear(grh)
	grh[0] = 6 << 4
	copy(grh[8:24], l.peerGID[:])
	copy(grh[24:40], q.port.gid[:])
	l.discard = false
	l.setSink(rw.segs[0][grhSize:], rw.segs[1:])
	l.act = rxAction{kind: actUD, q: q, wrid: rw.wrid}
}

// finish handles a packet whose payload has been placed.
func (d *Device) finish(l *link, now int64) {
	h := &l.h
	a := l.act
	l.act = rxAction{}
	switch a.kind {
	case actHandshake:
		d.finishHandshake(l, now)
	case actRecv:
		q := a.q
		if q.state == verbs.QPErr || q.destroyed {
			return
		}
		wc := verbs.WC{WRID: a.wrid, Opcode: verbs.WCRecv, ByteLen: h.length, QPN: q.qpn, SrcQP: h.sqpn}
		switch h.op {
		case opSendImm:
			wc.Flags, wc.Imm = verbs.WCWithImm, h.aux
		case opWriteImm:
			wc.Opcode, wc.Flags, wc.Imm = verbs.WCRecvRDMAWithImm, verbs.WCWithImm, h.aux
		}
		q.rcq.push(wc, h.flags&pktSolicited != 0)
		q.epsn++
		q.scheduleAck(h.psn, now, h.flags&pktAckReq != 0)
	case actWrite:
		q := a.q
		if q.state == verbs.QPErr || q.destroyed {
			return
		}
		q.epsn++
		q.scheduleAck(h.psn, now, h.flags&pktAckReq != 0)
	case actReadResp:
		q := a.q
		if q.state == verbs.QPErr || q.destroyed || a.idx < q.sqHead || a.idx >= q.sqNext {
			return
		}
		w := q.slot(a.idx)
		if w.done || w.psn != a.psn {
			return
		}
		w.done = true
		q.readsOut--
		d.readsDelta(-1)
		q.retriesLeft = q.retryCnt
		q.onAck(h.psn, now)
		q.retire(now)
		q.restartRTO(now)
		q.pump(now)
	case actUD:
		q := a.q
		if q.state == verbs.QPErr || q.destroyed {
			return
		}
		wc := verbs.WC{WRID: a.wrid, Opcode: verbs.WCRecv, Flags: verbs.WCGRH, ByteLen: h.length + grhSize, QPN: q.qpn, SrcQP: h.sqpn, SLID: l.peerLID}
		if h.op == opUDImm {
			wc.Flags |= verbs.WCWithImm
			wc.Imm = h.aux
		}
		q.rcq.push(wc, h.flags&pktSolicited != 0)
	case actDup:
		if a.q.state != verbs.QPErr && !a.q.destroyed {
			a.q.scheduleAck(a.q.epsn-1, now, true)
		}
	}
}

// postUD sends a datagram: it is written to the link of the destination
// port and completes once written (UD is unreliable: a datagram nobody
// has a buffer for is lost).
func (q *qp) postUD(wr *verbs.SendWR, now int64) error {
	a, ok := wr.AH.(*ah)
	if !ok || a == nil {
		return q.errf("UD send without a softrc address handle: %v", verbs.ErrInvalid)
	}
	p := q.port
	if a.attr.PortNum != 0 && int(a.attr.PortNum) <= len(q.d.ports) {
		p = q.d.ports[a.attr.PortNum-1]
	}
	l, err := p.linkTo(a.attr.DGID, a.attr.DLID)
	if err != nil {
		return fmt.Errorf("softrc: %s QP %#x: UD to LID %d: %w", q.d.name, q.qpn, a.attr.DLID, err)
	}
	if q.destroyed || q.d.closed {
		return q.errf("%v", verbs.ErrClosed)
	}
	if q.sqTail-q.sqHead >= uint64(len(q.sq)) {
		return q.errf("send queue full (%d): %v", len(q.sq), verbs.ErrQueueFull)
	}
	i := q.sqTail
	w := q.slot(i)
	base := int(i%uint64(len(q.sq))) * q.cap.MaxSendSGE
	segs, n, ok := q.resolve(wr.SG, q.sqSegs[base:base+q.cap.MaxSendSGE:base+q.cap.MaxSendSGE], false)
	*w = swqe{wrid: wr.WRID, op: wr.Opcode, flags: wr.Flags, segs: segs, length: n, imm: wr.Imm}
	if q.sigAll {
		w.flags |= verbs.SendSignaled
	}
	q.sqTail++
	q.sqNext = q.sqTail
	if q.state != verbs.QPRTS {
		w.done, w.status = true, verbs.WCWRFlushErr
		q.retire(now)
		return nil
	}
	if !ok {
		w.done, w.status = true, verbs.WCLocProtErr
		q.toErr(now)
		return nil
	}
	if int(n) > verbs.MTU4096.Bytes() {
		w.done, w.status = true, verbs.WCLocLenErr
		q.retire(now)
		return nil
	}
	h := header{op: opUD, dqpn: wr.RemoteQPN, sqpn: q.qpn, key: wr.RemoteQKey, length: n}
	if wr.Opcode == verbs.OpSendImm {
		h.op, h.aux = opUDImm, wr.Imm
	}
	if wr.Flags&verbs.SendSolicited != 0 {
		h.flags |= pktSolicited
	}
	l.enqueue(&h, nil, segs, q, itemUD, i, now)
	l.flush(now)
	return nil
}
