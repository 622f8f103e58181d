package simrc

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// swqe is a send work request in a QP's send queue.
type swqe struct {
	wrid   uint64
	op     verbs.Opcode
	flags  verbs.SendFlags
	sg     []verbs.SGE
	length int
	imm    uint32
	raddr  uint64
	rkey   uint32
	done   bool
	status verbs.WCStatus
}

type qp struct {
	d     *Device
	qpn   uint32
	typ   verbs.QPType
	state verbs.QPState
	attr  verbs.QPAttr
	port  *port
	scq   *cq
	rcq   *cq
	srq   *srq
	cap   verbs.QPCap
	sig   bool
	qkey  uint32
	// The receive queue (without an SRQ).
	rq rqueue
	// The send queue: [head, next) are on the wire, [next, tail) wait.
	// sq grows to sqMax as it fills: most connections of a large job
	// carry a few frames at a time, and the simulator's memory is the
	// job's.
	sq               []swqe
	sqMax            int
	head, next, tail uint64
	readsOut         int
	waiting          bool // an RNR or ACK-timeout wait before a resend
	rnrCount, retry  int
	// epsn is the responder's next expected request.
	epsn uint64
	// rnrNaks counts the RNR NAKs this QP received as requester.
	rnrNaks int64
}

// RNRNaksReceived is how many RNR NAKs the QP received as requester (the
// ib BTL's per-peer rnr_naks).
func (q *qp) RNRNaksReceived() int64 { return q.rnrNaks }

func (q *qp) slot(i uint64) *swqe { return &q.sq[i%uint64(len(q.sq))] }

func (p *pd) CreateQP(attr verbs.QPInitAttr) (verbs.QP, error) {
	d := p.d
	sc, ok1 := attr.SendCQ.(*cq)
	rc, ok2 := attr.RecvCQ.(*cq)
	if !ok1 || !ok2 || attr.Cap.MaxSendWR <= 0 {
		return nil, fmt.Errorf("simrc: create QP: %w", verbs.ErrInvalid)
	}
	q := &qp{d: d, qpn: d.nextQPN, typ: attr.Type, scq: sc, rcq: rc, cap: attr.Cap, sig: attr.SigAll,
		sq: make([]swqe, min(8, attr.Cap.MaxSendWR)), sqMax: attr.Cap.MaxSendWR}
	if attr.SRQ != nil {
		s, ok := attr.SRQ.(*srq)
		if !ok {
			return nil, fmt.Errorf("simrc: an SRQ of another provider: %w", verbs.ErrInvalid)
		}
		q.srq = s
	}
	d.nextQPN++
	d.qps[q.qpn] = q
	if q.typ == verbs.QPTypeRC {
		d.st.QPs++
	}
	return q, nil
}

func (q *qp) QPN() uint32        { return q.qpn }
func (q *qp) Type() verbs.QPType { return q.typ }
func (q *qp) Query() (verbs.QPAttr, error) {
	a := q.attr
	a.State = q.state
	return a, nil
}

func (q *qp) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	if mask&verbs.QPAttrPort != 0 {
		if attr.Port == 0 || int(attr.Port) > len(q.d.ports) {
			return fmt.Errorf("simrc: QP %#x: port %d: %w", q.qpn, attr.Port, verbs.ErrInvalid)
		}
		q.port = q.d.ports[attr.Port-1]
		q.attr.Port = attr.Port
	}
	if mask&verbs.QPAttrQKey != 0 {
		q.qkey = attr.QKey
	}
	if mask&verbs.QPAttrAV != 0 {
		q.attr.AH = attr.AH
	}
	if mask&verbs.QPAttrDestQPN != 0 {
		q.attr.DestQPN = attr.DestQPN
	}
	if mask&verbs.QPAttrMinRNRTimer != 0 {
		q.attr.MinRNRTimer = attr.MinRNRTimer
	}
	if mask&verbs.QPAttrRNRRetry != 0 {
		q.attr.RNRRetry = attr.RNRRetry
	}
	if mask&verbs.QPAttrRetryCnt != 0 {
		q.attr.RetryCnt = attr.RetryCnt
	}
	if mask&verbs.QPAttrTimeout != 0 {
		q.attr.Timeout = attr.Timeout
	}
	if mask&verbs.QPAttrMaxQPRdAtomic != 0 {
		q.attr.MaxRdAtomic = attr.MaxRdAtomic
	}
	if mask&verbs.QPAttrAccessFlags != 0 {
		q.attr.AccessFlags = attr.AccessFlags
	}
	if mask&verbs.QPAttrState == 0 {
		return nil
	}
	switch to := attr.State; {
	case to == verbs.QPErr:
		q.toErr()
	case to == verbs.QPReset:
		q.toErr()
		q.state, q.head, q.next, q.tail, q.epsn, q.readsOut, q.waiting = verbs.QPReset, 0, 0, 0, 0, 0, false
		q.scq.q, q.scq.head = q.scq.q[:0], 0
	case to == q.state+1 && to <= verbs.QPRTS:
		if q.port == nil {
			return fmt.Errorf("simrc: QP %#x to %v without a port: %w", q.qpn, to, verbs.ErrInvalid)
		}
		q.state = to
	default:
		return fmt.Errorf("simrc: QP %#x %v → %v: %w", q.qpn, q.state, to, verbs.ErrState)
	}
	return nil
}

func (q *qp) Destroy() error {
	q.toErr()
	delete(q.d.qps, q.qpn)
	return nil
}

func (q *qp) PostRecv(wr *verbs.RecvWR) error {
	if q.srq != nil || q.state == verbs.QPReset {
		return fmt.Errorf("simrc: QP %#x: post receive: %w", q.qpn, verbs.ErrInvalid)
	}
	if q.state == verbs.QPErr {
		q.rcq.push(verbs.WC{WRID: wr.WRID, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPN: q.qpn}, false)
		return nil
	}
	if q.rq.posted() >= q.cap.MaxRecvWR {
		return fmt.Errorf("simrc: QP %#x: receive queue full: %w", q.qpn, verbs.ErrQueueFull)
	}
	q.rq.push(q.d.recvWQE(wr))
	if q.typ == verbs.QPTypeRC {
		q.d.st.MaxPostedPerQP = max(q.d.st.MaxPostedPerQP, q.rq.posted())
	}
	return nil
}

func (q *qp) takeRecv() (rwqe, bool) {
	if q.srq != nil {
		return q.srq.take()
	}
	return q.rq.pop(q.d)
}

func (q *qp) PostSend(wr *verbs.SendWR) error {
	if q.state == verbs.QPErr {
		q.scq.push(verbs.WC{WRID: wr.WRID, Status: verbs.WCWRFlushErr, QPN: q.qpn}, false)
		return nil
	}
	if q.state != verbs.QPRTS {
		return fmt.Errorf("simrc: QP %#x post send in %v: %w", q.qpn, q.state, verbs.ErrState)
	}
	if q.typ == verbs.QPTypeUD {
		return q.postUD(wr)
	}
	switch wr.Opcode {
	case verbs.OpSend, verbs.OpSendImm, verbs.OpRDMAWrite, verbs.OpRDMARead:
	default:
		return fmt.Errorf("simrc: QP %#x: opcode %v is not simulated: %w", q.qpn, wr.Opcode, verbs.ErrInvalid)
	}
	if q.tail-q.head >= uint64(len(q.sq)) {
		if len(q.sq) >= q.sqMax {
			return fmt.Errorf("simrc: QP %#x: send queue full (%d): %w", q.qpn, len(q.sq), verbs.ErrQueueFull)
		}
		sq := make([]swqe, min(2*len(q.sq), q.sqMax))
		for i := q.head; i < q.tail; i++ {
			sq[i%uint64(len(sq))] = *q.slot(i)
		}
		q.sq = sq
	}
	w := swqe{wrid: wr.WRID, op: wr.Opcode, flags: wr.Flags, sg: append([]verbs.SGE(nil), wr.SG...), imm: wr.Imm, raddr: wr.RemoteAddr, rkey: wr.RKey}
	for _, e := range wr.SG {
		w.length += int(e.Length)
	}
	if q.sig {
		w.flags |= verbs.SendSignaled
	}
	if _, _, ok := q.d.gather(w.sg); !ok {
		return fmt.Errorf("simrc: QP %#x: local key: %w", q.qpn, verbs.ErrProtection)
	}
	*q.slot(q.tail) = w
	q.tail++
	q.pump()
	return nil
}

// peer is the responder QP this RC QP is connected to, nil if gone.
func (q *qp) peer() (*qp, *port) {
	p := q.d.f.portOf(q.attr.AH.DGID, q.attr.AH.DLID)
	if p == nil || p.d.closed {
		return nil, nil
	}
	return p.d.qps[q.attr.DestQPN], p
}

// pump puts waiting work requests on the wire, in order, stopping at a
// read beyond max_rd_atomic.
func (q *qp) pump() {
	f := q.d.f
	for q.next < q.tail && !q.waiting && q.state == verbs.QPRTS {
		i := q.next
		w := q.slot(i)
		if w.op == verbs.OpRDMARead && q.readsOut >= max(1, int(q.attr.MaxRdAtomic)) {
			return
		}
		_, dp := q.peer()
		if dp == nil {
			q.complete(i, verbs.WCRetryExcErr)
			return
		}
		var t = f.ack(q.port)
		if w.op == verbs.OpRDMARead {
			q.readsOut++
			q.d.st.MaxReadsOutstanding = max(q.d.st.MaxReadsOutstanding, q.readsOut)
			t = max(t, f.send(q.port, dp, 0))
		} else {
			t = f.send(q.port, dp, w.length)
		}
		q.next++
		qpn := q.attr.DestQPN
		f.s.At(t, func() { dp.d.request(dp, qpn, q, i) })
	}
}

// request is the responder's side: request i of requester rq reaches
// the QP qpn of this device.
func (d *Device) request(at *port, qpn uint32, rq *qp, i uint64) {
	f := d.f
	r := d.qps[qpn]
	if rq.state != verbs.QPRTS || i >= rq.tail || i < rq.head || rq.slot(i).done {
		return // the requester failed or reset meanwhile
	}
	if r == nil || (r.state != verbs.QPRTR && r.state != verbs.QPRTS) {
		// Dropped: the requester resends after its ACK timeout.
		rq.resendAfter(i, verbs.AckTimeout(rq.attr.Timeout), false)
		return
	}
	if i != r.epsn {
		return // behind a NAKed request: go-back-N drops it
	}
	w := rq.slot(i)
	back := f.ack(at)
	switch w.op {
	case verbs.OpSend, verbs.OpSendImm:
		rw, ok := r.takeRecv()
		if !ok {
			timer := verbs.RNRTimer(r.attr.MinRNRTimer)
			f.s.At(back, func() { rq.rnrNak(i, timer) })
			return
		}
		src, n, _ := rq.d.gather(w.sg)
		dst, _, ok := d.gather(rw.sg)
		if !ok || n > rw.len {
			r.rcq.push(verbs.WC{WRID: rw.wrid, Status: verbs.WCLocLenErr, Opcode: verbs.WCRecv, QPN: r.qpn}, false)
			r.toErr()
			f.s.At(back, func() { rq.complete(i, verbs.WCRemInvReqErr) })
			return
		}
		copySG(dst, src)
		wc := verbs.WC{WRID: rw.wrid, Opcode: verbs.WCRecv, ByteLen: uint32(n), QPN: r.qpn}
		if w.op == verbs.OpSendImm {
			wc.Flags, wc.Imm = verbs.WCWithImm, w.imm
		}
		r.rcq.push(wc, w.flags&verbs.SendSolicited != 0)
		rq.d.st.Sends++
	case verbs.OpRDMAWrite:
		rem, ok := d.slice(w.rkey, w.raddr, uint64(w.length), verbs.AccessRemoteWrite)
		if !ok {
			r.toErr()
			f.s.At(back, func() { rq.complete(i, verbs.WCRemAccessErr) })
			return
		}
		src, _, _ := rq.d.gather(w.sg)
		copySG([][]byte{rem}, src)
		rq.d.st.Writes++
	case verbs.OpRDMARead:
		rem, ok := d.slice(w.rkey, w.raddr, uint64(w.length), verbs.AccessRemoteRead)
		if !ok {
			r.toErr()
			f.s.At(back, func() { rq.complete(i, verbs.WCRemAccessErr) })
			return
		}
		r.epsn++
		t := f.send(at, rq.port, w.length)
		f.s.At(t, func() {
			if rq.state != verbs.QPRTS || i < rq.head || i >= rq.next {
				return
			}
			dst, _, _ := rq.d.gather(w.sg)
			copySG(dst, [][]byte{rem})
			rq.readsOut--
			rq.d.st.Reads++
			rq.d.st.Bytes += int64(w.length)
			rq.complete(i, verbs.WCSuccess)
			rq.pump()
		})
		return
	}
	r.epsn++
	rq.d.st.Bytes += int64(w.length)
	f.s.At(back, func() { rq.complete(i, verbs.WCSuccess) })
}

func copySG(dst, src [][]byte) {
	di, do := 0, 0
	for _, s := range src {
		for len(s) > 0 && di < len(dst) {
			n := copy(dst[di][do:], s)
			s, do = s[n:], do+n
			if do == len(dst[di]) {
				di, do = di+1, 0
			}
		}
	}
}

// rnrNak: request i was NAKed for want of a receive WQE. The requester
// waits the responder's timer and resends from i; the requests behind it
// already on the wire are dropped by the responder.
func (q *qp) rnrNak(i uint64, timer interface{ Nanoseconds() int64 }) {
	if q.state != verbs.QPRTS || i < q.head || i >= q.next || q.waiting {
		return
	}
	q.d.st.RNRNaks++
	q.rnrNaks++
	q.rnrCount++
	if q.attr.RNRRetry != verbs.RNRRetryInfinite && q.rnrCount > int(q.attr.RNRRetry) {
		q.complete(i, verbs.WCRNRRetryExcErr)
		return
	}
	q.rewind(i)
	q.waiting = true
	q.d.f.s.At(q.d.f.s.Now()+timeOf(timer), func() { q.waiting = false; q.pump() })
}

// resendAfter: request i was dropped; after d the requester resends from
// it, retry_cnt times.
func (q *qp) resendAfter(i uint64, d interface{ Nanoseconds() int64 }, _ bool) {
	if q.waiting || i >= q.next {
		return
	}
	q.retry++
	if q.retry > int(q.attr.RetryCnt) {
		q.complete(i, verbs.WCRetryExcErr)
		return
	}
	q.rewind(i)
	q.waiting = true
	q.d.f.s.At(q.d.f.s.Now()+timeOf(d), func() { q.waiting = false; q.pump() })
}

func (q *qp) rewind(i uint64) {
	for j := i; j < q.next; j++ {
		if q.slot(j).op == verbs.OpRDMARead && !q.slot(j).done {
			q.readsOut--
		}
	}
	q.next = i
}

// complete finishes request i with status; an error moves the QP to ERR.
// Completions retire in order.
func (q *qp) complete(i uint64, st verbs.WCStatus) {
	if i < q.head || i >= q.tail {
		return
	}
	w := q.slot(i)
	w.done, w.status = true, st
	if st == verbs.WCSuccess {
		q.rnrCount, q.retry = 0, 0
	}
	for q.head < q.tail && q.slot(q.head).done {
		w := q.slot(q.head)
		if w.flags&verbs.SendSignaled != 0 || w.status != verbs.WCSuccess {
			q.scq.push(verbs.WC{WRID: w.wrid, Status: w.status, Opcode: wcOp(w.op), ByteLen: uint32(w.length), QPN: q.qpn}, false)
		}
		q.head++
	}
	if st != verbs.WCSuccess {
		q.toErr()
	}
}

func wcOp(op verbs.Opcode) verbs.WCOpcode {
	switch op {
	case verbs.OpRDMAWrite:
		return verbs.WCRDMAWrite
	case verbs.OpRDMARead:
		return verbs.WCRDMARead
	}
	return verbs.WCSend
}

// toErr moves the QP to ERR and flushes every outstanding request.
func (q *qp) toErr() {
	if q.state == verbs.QPErr {
		return
	}
	q.state = verbs.QPErr
	for ; q.head < q.tail; q.head++ {
		w := q.slot(q.head)
		st := verbs.WCWRFlushErr
		if w.done {
			st = w.status
		}
		q.scq.push(verbs.WC{WRID: w.wrid, Status: st, Opcode: wcOp(w.op), QPN: q.qpn}, false)
	}
	q.next, q.readsOut, q.waiting = q.tail, 0, false
	if q.srq == nil {
		for w, ok := q.rq.pop(q.d); ok; w, ok = q.rq.pop(q.d) {
			q.rcq.push(verbs.WC{WRID: w.wrid, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPN: q.qpn}, false)
		}
	}
	if q.typ == verbs.QPTypeRC {
		q.d.raise(verbs.AsyncEvent{Type: verbs.EventQPFatal, QPN: q.qpn})
	}
}

const grhSize = 40

// postUD sends a datagram: lost when the destination has no receive
// WQE, completed locally once it has left.
func (q *qp) postUD(wr *verbs.SendWR) error {
	a, ok := wr.AH.(*ah)
	if !ok || a == nil {
		return fmt.Errorf("simrc: UD send without a sim address handle: %w", verbs.ErrInvalid)
	}
	f := q.d.f
	src, n, ok := q.d.gather(wr.SG)
	if !ok {
		return fmt.Errorf("simrc: QP %#x: local key: %w", q.qpn, verbs.ErrProtection)
	}
	buf := make([]byte, 0, n)
	for _, s := range src {
		buf = append(buf, s...)
	}
	q.d.st.Datagrams++
	if wr.Flags&verbs.SendSignaled != 0 || q.sig {
		q.scq.push(verbs.WC{WRID: wr.WRID, Opcode: verbs.WCSend, ByteLen: uint32(n), QPN: q.qpn}, false)
	}
	dp := f.portOf(a.attr.DGID, a.attr.DLID)
	if dp == nil {
		return nil
	}
	sp, dqpn, qkey, sol := q.port, wr.RemoteQPN, wr.RemoteQKey, wr.Flags&verbs.SendSolicited != 0
	t := f.send(sp, dp, n)
	f.s.At(t, func() {
		r := dp.d.qps[dqpn]
		if r == nil || dp.d.closed || r.typ != verbs.QPTypeUD || (r.state != verbs.QPRTR && r.state != verbs.QPRTS) || r.qkey != qkey {
			return
		}
		rw, ok := r.takeRecv()
		if !ok {
			return // UD has no RNR: the datagram is lost
		}
		dst, _, ok := dp.d.gather(rw.sg)
		if !ok || len(dst) == 0 || len(dst[0]) < grhSize || n+grhSize > rw.len {
			r.rcq.push(verbs.WC{WRID: rw.wrid, Status: verbs.WCLocLenErr, Opcode: verbs.WCRecv, QPN: r.qpn}, false)
			return
		}
		grh := dst[0][:grhSize]
		clear(grh)
		grh[0] = 6 << 4
		copy(grh[8:24], sp.gid[:])
		copy(grh[24:40], dp.gid[:])
		dst[0] = dst[0][grhSize:]
		copySG(dst, [][]byte{buf})
		r.rcq.push(verbs.WC{WRID: rw.wrid, Opcode: verbs.WCRecv, ByteLen: uint32(n + grhSize), QPN: r.qpn, SrcQP: q.qpn, SLID: sp.lid, Flags: verbs.WCGRH}, sol)
	})
	return nil
}
