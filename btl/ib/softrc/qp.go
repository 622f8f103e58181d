package softrc

import (
	"fmt"
	"sync/atomic"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// swqe is a send work queue entry.
type swqe struct {
	wrid    uint64
	op      verbs.Opcode
	flags   verbs.SendFlags
	segs    [][]byte // local memory, resolved from the SGEs at post time
	length  uint32
	imm     uint32
	raddr   uint64
	rkey    uint32
	psn     uint32
	sent    bool // transmitted at least once
	done    bool
	status  verbs.WCStatus
	rnrLeft uint8
}

// rwqe is a receive work queue entry.
type rwqe struct {
	wrid   uint64
	segs   [][]byte
	length int
}

// qp is a softrc queue pair. The send queue is a ring indexed by three
// monotonic counters: [sqHead, sqNext) is on the wire awaiting ACK or read
// response, [sqNext, sqTail) waits to be transmitted. Going back (after
// an RNR NAK or an ACK timeout) moves sqNext back, as an HCA retransmits
// go-back-N from the first unacknowledged PSN.
type qp struct {
	d       *Device
	pd      *pd
	qpn     uint32
	typ     verbs.QPType
	state   verbs.QPState
	scq     *cq
	rcq     *cq
	srq     *srq
	sigAll  bool
	cap     verbs.QPCap
	port    *port
	qkey    uint32
	access  verbs.Access
	pkeyIdx uint16

	// RC connection
	ah        verbs.AHAttr
	dqpn      uint32
	mtu       verbs.MTU
	out       *link // the link this QP sends on
	in        *link // the link its peer's packets last came on
	timeout   int64
	timeoutCd uint8
	retryCnt  uint8
	rnrRetry  uint8
	minRNR    uint8
	maxRd     int
	maxDestRd int
	rqPSN     uint32
	sqPSN     uint32

	// requester
	sq          []swqe
	sqSegs      [][]byte
	sqHead      uint64
	sqNext      uint64
	sqTail      uint64
	npsn        uint32
	readsOut    int
	rnrUntil    int64
	retriesLeft uint8
	rtoAt       int64

	// responder
	rq          []rwqe
	rqSegs      [][]byte
	rqHead      uint64
	rqTail      uint64
	epsn        uint32
	ackPending  bool
	ackPSN      uint32
	unacked     int
	ackDeadline int64
	destReads   int

	timerListed bool
	destroyed   bool

	rnrNaks atomic.Int64 // RNR NAKs received as requester
}

// RNRNaksReceived counts the RNR NAKs this QP received as requester: how
// often its peer had no receive posted (seed 000 §4.1's hardware flow
// control at work).
func (q *qp) RNRNaksReceived() int64 { return q.rnrNaks.Load() }

func (q *qp) slot(i uint64) *swqe { return &q.sq[i%uint64(len(q.sq))] }

// QPN returns the QP number.
func (q *qp) QPN() uint32 { return q.qpn }

// Type returns the transport service.
func (q *qp) Type() verbs.QPType { return q.typ }

func (q *qp) errf(format string, args ...any) error {
	return fmt.Errorf("softrc: %s QP %#x: "+format, append([]any{q.d.name, q.qpn}, args...)...)
}

// Modify changes the QP's attributes. The RC transitions require the
// attribute sets the IBA requires (verbs.RCInitMask, RCRTRMask,
// RCRTSMask); moving to RTR connects the QP's port to the destination
// port.
func (q *qp) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	d := q.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if q.destroyed || d.closed {
		return q.errf("%w", verbs.ErrClosed)
	}
	if mask&verbs.QPAttrState == 0 {
		return q.modifyAttrs(attr, mask)
	}
	cur, next := q.state, attr.State
	now := nowNS()
	var err error
	switch {
	case next == verbs.QPReset:
		q.reset()
		return nil
	case next == verbs.QPErr:
		q.toErr(now)
		return nil
	case cur == verbs.QPReset && next == verbs.QPInit:
		err = q.toInit(attr, mask)
	case cur == verbs.QPInit && next == verbs.QPRTR:
		err = q.toRTR(attr, mask)
	case cur == verbs.QPRTR && next == verbs.QPRTS:
		err = q.toRTS(attr, mask)
	case cur == verbs.QPInit && next == verbs.QPInit,
		cur == verbs.QPRTS && next == verbs.QPRTS, cur == verbs.QPRTR && next == verbs.QPRTR:
		return q.modifyAttrs(attr, mask&^verbs.QPAttrState)
	default:
		return q.errf("transition %v→%v: %w", cur, next, verbs.ErrState)
	}
	if err != nil {
		return err
	}
	q.state = next
	if next == verbs.QPRTS {
		q.pump(now)
		q.flush(now)
	}
	return nil
}

// need checks that mask has every attribute of want, as the transition
// from the QP's state to next requires.
func (q *qp) need(mask, want verbs.QPAttrMask, next verbs.QPState) error {
	if mask&want != want {
		return fmt.Errorf("softrc: %s QP %#x: %v→%v needs attribute mask %#x, got %#x: %w", q.d.name, q.qpn, q.state, next, uint32(want), uint32(mask), verbs.ErrInvalid)
	}
	return nil
}

// toInit checks and takes the attributes of Reset→Init: the port (which
// must be up), the partition key, the access flags and (UD) the Q_Key.
// d.mu is held.
func (q *qp) toInit(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	m := verbs.RCInitMask
	if q.typ == verbs.QPTypeUD {
		m = verbs.UDInitMask
	}
	if err := q.need(mask, m, verbs.QPInit); err != nil {
		return err
	}
	p, err := q.d.portLocked(attr.Port)
	if err != nil {
		return err
	}
	if p.down {
		return q.errf("port %d is down", attr.Port)
	}
	q.port, q.pkeyIdx, q.access, q.qkey = p, attr.PKeyIndex, attr.AccessFlags, attr.QKey
	return nil
}

// toRTR checks and takes the attributes of Init→RTR and connects an RC
// QP's port to the destination's; a UD QP needs none. d.mu is held
// (linkTo may drop it while it connects).
func (q *qp) toRTR(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	if q.typ == verbs.QPTypeUD {
		return nil
	}
	if err := q.need(mask, verbs.RCRTRMask, verbs.QPRTR); err != nil {
		return err
	}
	if attr.PathMTU.Bytes() == 0 {
		return q.errf("path MTU code %d: %w", attr.PathMTU, verbs.ErrInvalid)
	}
	if int(attr.MaxDestRdAtomic) > maxRdAtomic {
		return q.errf("max_dest_rd_atomic %d exceeds %d: %w", attr.MaxDestRdAtomic, maxRdAtomic, verbs.ErrInvalid)
	}
	l, err := q.port.linkTo(attr.AH.DGID, attr.AH.DLID)
	if err != nil {
		return fmt.Errorf("softrc: %s QP %#x: connect to LID %d: %w", q.d.name, q.qpn, attr.AH.DLID, err)
	}
	if q.destroyed || q.state != verbs.QPInit {
		return q.errf("changed state while connecting: %w", verbs.ErrState)
	}
	q.ah, q.mtu, q.dqpn = attr.AH, attr.PathMTU, attr.DestQPN
	q.rqPSN, q.epsn = attr.RQPSN, attr.RQPSN
	q.maxDestRd, q.minRNR = int(attr.MaxDestRdAtomic), attr.MinRNRTimer&31
	q.out = l
	q.port.markSpares(attr.AH.DGID, attr.AH.DLID)
	return nil
}

// toRTS checks and takes the attributes of RTR→RTS: the send PSN and, for
// RC, the timeout, the retry counts and the RDMA reads in flight. d.mu is
// held.
func (q *qp) toRTS(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	if q.typ == verbs.QPTypeUD {
		if err := q.need(mask, verbs.UDRTSMask, verbs.QPRTS); err != nil {
			return err
		}
		q.sqPSN = attr.SQPSN
		return nil
	}
	if err := q.need(mask, verbs.RCRTSMask, verbs.QPRTS); err != nil {
		return err
	}
	if attr.RetryCnt > 7 || attr.RNRRetry > 7 {
		return q.errf("retry_cnt %d / rnr_retry %d exceed 7: %w", attr.RetryCnt, attr.RNRRetry, verbs.ErrInvalid)
	}
	if int(attr.MaxRdAtomic) > maxRdAtomic {
		return q.errf("max_rd_atomic %d exceeds %d: %w", attr.MaxRdAtomic, maxRdAtomic, verbs.ErrInvalid)
	}
	q.sqPSN, q.npsn = attr.SQPSN, attr.SQPSN
	q.timeoutCd, q.timeout = attr.Timeout, int64(verbs.AckTimeout(attr.Timeout))
	q.retryCnt, q.retriesLeft, q.rnrRetry = attr.RetryCnt, attr.RetryCnt, attr.RNRRetry
	q.maxRd = int(attr.MaxRdAtomic)
	if q.maxRd == 0 {
		q.maxRd = 1
	}
	return nil
}

// modifyAttrs applies the attributes that may change without a state
// transition.
func (q *qp) modifyAttrs(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	if mask&verbs.QPAttrMinRNRTimer != 0 {
		q.minRNR = attr.MinRNRTimer & 31
	}
	if mask&verbs.QPAttrTimeout != 0 {
		q.timeoutCd, q.timeout = attr.Timeout, int64(verbs.AckTimeout(attr.Timeout))
	}
	if mask&verbs.QPAttrAccessFlags != 0 {
		q.access = attr.AccessFlags
	}
	if mask&verbs.QPAttrQKey != 0 {
		q.qkey = attr.QKey
	}
	return nil
}

// Query returns the QP's attributes.
func (q *qp) Query() (verbs.QPAttr, error) {
	q.d.mu.Lock()
	defer q.d.mu.Unlock()
	return verbs.QPAttr{
		State: q.state, PKeyIndex: q.pkeyIdx, QKey: q.qkey, AccessFlags: q.access,
		AH: q.ah, PathMTU: q.mtu, DestQPN: q.dqpn, RQPSN: q.rqPSN, SQPSN: q.sqPSN,
		MaxDestRdAtomic: uint8(q.maxDestRd), MaxRdAtomic: uint8(q.maxRd), MinRNRTimer: q.minRNR,
		Timeout: q.timeoutCd, RetryCnt: q.retryCnt, RNRRetry: q.rnrRetry,
		Port: func() uint8 {
			if q.port != nil {
				return q.port.num
			}
			return 0
		}(),
	}, nil
}

// Destroy releases the QP. Outstanding work is dropped without
// completions, as ibv_destroy_qp does.
func (q *qp) Destroy() error {
	d := q.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if q.destroyed {
		return nil
	}
	q.cancelAll()
	q.destroyed = true
	q.pd.objs--
	q.state = verbs.QPReset
	delete(d.qps, q.qpn)
	q.clearTimers()
	d.setReadsGauge()
	return nil
}

func (q *qp) reset() {
	q.cancelAll()
	q.state = verbs.QPReset
	q.sqHead, q.sqNext, q.sqTail = 0, 0, 0
	q.rqHead, q.rqTail = 0, 0
	q.readsOut, q.destReads = 0, 0
	q.out, q.in = nil, nil
	q.clearTimers()
	q.d.setReadsGauge()
}

func (q *qp) clearTimers() {
	q.ackPending, q.unacked, q.ackDeadline, q.rnrUntil, q.rtoAt = false, 0, 0, 0, 0
}

func (q *qp) cancelAll() {
	for _, l := range q.d.links {
		l.cancel(q, false)
	}
}

// ---- posting ----

// resolve turns SGEs into slices of registered memory, checking lkeys,
// ranges and (for write) local-write access.
func (q *qp) resolve(sg []verbs.SGE, dst [][]byte, write bool) ([][]byte, uint32, bool) {
	var total uint64
	dst = dst[:0]
	for _, e := range sg {
		m := q.d.mrs[e.LKey]
		if m == nil || m.dead || m.pd != q.pd {
			return dst, 0, false
		}
		if write && m.access&verbs.AccessLocalWrite == 0 {
			return dst, 0, false
		}
		b, ok := m.slice(e.Addr, uint64(e.Length))
		if !ok {
			return dst, 0, false
		}
		total += uint64(e.Length)
		dst = append(dst, b)
	}
	if total >= maxPayload {
		return dst, 0, false
	}
	return dst, uint32(total), true
}

// PostSend posts a send work request and, if the QP can transmit, puts it
// on the wire at once.
func (q *qp) PostSend(wr *verbs.SendWR) error {
	d := q.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if q.destroyed || d.closed {
		return q.errf("%w", verbs.ErrClosed)
	}
	if q.state != verbs.QPRTS && q.state != verbs.QPErr {
		return q.errf("post send in state %v: %w", q.state, verbs.ErrState)
	}
	if len(wr.SG) > q.cap.MaxSendSGE {
		return q.errf("%d SGEs, the QP takes %d: %w", len(wr.SG), q.cap.MaxSendSGE, verbs.ErrInvalid)
	}
	if q.sqTail-q.sqHead >= uint64(len(q.sq)) {
		return q.errf("send queue full (%d): %w", len(q.sq), verbs.ErrQueueFull)
	}
	switch wr.Opcode {
	case verbs.OpSend, verbs.OpSendImm:
	case verbs.OpRDMAWrite, verbs.OpRDMAWriteImm, verbs.OpRDMARead:
		if q.typ != verbs.QPTypeRC {
			return q.errf("%v on a %v QP: %w", wr.Opcode, q.typ, verbs.ErrInvalid)
		}
	default:
		return q.errf("opcode %v: %w", wr.Opcode, verbs.ErrInvalid)
	}
	now := nowNS()
	if q.typ == verbs.QPTypeUD {
		return q.postUD(wr, now)
	}
	i := q.sqTail
	w := q.slot(i)
	base := int(i%uint64(len(q.sq))) * q.cap.MaxSendSGE
	segs, n, ok := q.resolve(wr.SG, q.sqSegs[base:base+q.cap.MaxSendSGE:base+q.cap.MaxSendSGE], wr.Opcode == verbs.OpRDMARead)
	*w = swqe{wrid: wr.WRID, op: wr.Opcode, flags: wr.Flags, segs: segs, length: n, imm: wr.Imm,
		raddr: wr.RemoteAddr, rkey: wr.RKey, psn: q.npsn, rnrLeft: q.rnrRetry}
	if q.sigAll {
		w.flags |= verbs.SendSignaled
	}
	q.npsn++
	q.sqTail++
	if q.state == verbs.QPErr {
		w.done, w.status = true, verbs.WCWRFlushErr
		q.sqNext = q.sqTail
		q.retire(now)
		return nil
	}
	if !ok {
		// A bad local key is reported by the completion, as an HCA does.
		w.done, w.status = true, verbs.WCLocProtErr
		q.sqNext = q.sqTail
		q.toErr(now)
		return nil
	}
	q.pump(now)
	// A doorbell per poll: the first send after a poll goes on the wire
	// at once (a ping-pong's reply waits for nothing), later ones wait for
	// the next poll, which writes them all with one writev — a window of
	// 64 posted in a row costs two writes, not 64. A process that posts
	// and stops polling has them written by the device goroutine within
	// IdleAfter.
	if l := q.out; l != nil && l.wroteAt == d.polls {
		d.stats.SendsBatched++
		return nil
	}
	q.flush(now)
	return nil
}

func (q *qp) flush(now int64) {
	if q.out != nil && !q.out.dead && !q.out.outArmed {
		q.out.flush(now)
	}
}

// PostRecv posts a receive work request.
func (q *qp) PostRecv(wr *verbs.RecvWR) error {
	d := q.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if q.destroyed || d.closed {
		return q.errf("%w", verbs.ErrClosed)
	}
	if q.srq != nil {
		return q.errf("post recv on a QP with an SRQ: %w", verbs.ErrInvalid)
	}
	if q.state == verbs.QPReset {
		return q.errf("post recv in state RESET: %w", verbs.ErrState)
	}
	if len(wr.SG) > q.cap.MaxRecvSGE {
		return q.errf("%d SGEs, the QP takes %d: %w", len(wr.SG), q.cap.MaxRecvSGE, verbs.ErrInvalid)
	}
	if q.rqTail-q.rqHead >= uint64(len(q.rq)) {
		return q.errf("receive queue full (%d): %w", len(q.rq), verbs.ErrQueueFull)
	}
	slot := int(q.rqTail % uint64(len(q.rq)))
	base := slot * q.cap.MaxRecvSGE
	segs, n, ok := q.resolve(wr.SG, q.rqSegs[base:base+q.cap.MaxRecvSGE:base+q.cap.MaxRecvSGE], true)
	if !ok {
		return q.errf("receive SGE outside a registration with local write access: %w", verbs.ErrProtection)
	}
	q.rq[slot] = rwqe{wrid: wr.WRID, segs: segs, length: int(n)}
	q.rqTail++
	if q.state == verbs.QPErr {
		q.flushRecv()
	}
	return nil
}

// ---- requester ----

// pump transmits waiting WQEs as far as the QP may: in RTS, not waiting
// out an RNR timer, and with fewer than max_rd_atomic reads outstanding
// (a read that must wait holds up the WQEs behind it, as the send queue is
// processed in order).
func (q *qp) pump(now int64) {
	if q.state != verbs.QPRTS || q.rnrUntil != 0 || q.typ != verbs.QPTypeRC {
		return
	}
	if q.out == nil || q.out.dead {
		return
	}
	for q.sqNext < q.sqTail {
		w := q.slot(q.sqNext)
		if w.done {
			q.sqNext++
			continue
		}
		if w.op == verbs.OpRDMARead {
			if q.readsOut >= q.maxRd {
				return
			}
			q.readsOut++
			q.d.readsDelta(1)
		}
		q.transmit(w, now)
		q.sqNext++
	}
}

var rcOpcodes = [...]uint8{
	verbs.OpRDMAWrite: opWrite, verbs.OpRDMAWriteImm: opWriteImm,
	verbs.OpSend: opSend, verbs.OpSendImm: opSendImm, verbs.OpRDMARead: opReadReq,
}

func (q *qp) transmit(w *swqe, now int64) {
	w.sent = true
	h := header{op: rcOpcodes[w.op], dqpn: q.dqpn, sqpn: q.qpn, psn: w.psn}
	switch w.op {
	case verbs.OpSend, verbs.OpSendImm, verbs.OpRDMAWriteImm:
		if w.flags&verbs.SendSolicited != 0 {
			h.flags |= pktSolicited
		}
	}
	switch w.op {
	case verbs.OpSendImm, verbs.OpRDMAWriteImm:
		h.aux = w.imm
	case verbs.OpRDMARead:
		h.aux = w.length
	}
	if w.op != verbs.OpSend && w.op != verbs.OpSendImm {
		h.raddr, h.key = w.raddr, w.rkey
	}
	if q.sqNext-q.sqHead+1 >= uint64(len(q.sq))/2 {
		h.flags |= pktAckReq
	}
	q.piggyback(&h)
	var segs [][]byte
	if w.op != verbs.OpRDMARead {
		segs = w.segs
		h.length = w.length
	}
	q.out.enqueue(&h, nil, segs, q, itemReq, q.sqNext, now)
}

// piggyback puts a pending ACK on a packet going to the peer.
func (q *qp) piggyback(h *header) {
	if q.ackPending {
		h.flags |= pktAckValid
		h.ack = q.ackPSN
		q.ackPending, q.unacked, q.ackDeadline = false, 0, 0
		q.d.stats.AcksPiggybacked++
	}
}

// onWritten is told when one of the QP's packets has left on the wire.
func (q *qp) onWritten(kind uint8, idx uint64, now int64) {
	switch kind {
	case itemReq:
		if q.rtoAt == 0 && q.timeout > 0 && q.sqHead < q.sqNext {
			q.rtoAt = now + q.timeout
			q.d.addTimerQP(q)
			q.d.setDeadline(q.rtoAt)
		}
	case itemReadResp:
		if q.destReads > 0 {
			q.destReads--
		}
	case itemUD:
		if idx >= q.sqHead && idx < q.sqTail {
			q.slot(idx).done = true
			q.retire(now)
		}
	}
}

// onAck handles an ACK (explicit or piggybacked) of every request up to
// and including psn.
func (q *qp) onAck(psn uint32, now int64) {
	progress := false
	for i := q.sqHead; i < q.sqNext; i++ {
		w := q.slot(i)
		if psnBefore(psn, w.psn) {
			break
		}
		if !w.done && w.op != verbs.OpRDMARead {
			w.done = true
			progress = true
		}
	}
	if progress {
		q.retriesLeft = q.retryCnt
		q.retire(now)
		q.restartRTO(now)
	}
}

func (q *qp) restartRTO(now int64) {
	if q.sqHead == q.sqNext || q.timeout == 0 {
		q.rtoAt = 0
		return
	}
	q.rtoAt = now + q.timeout
	q.d.addTimerQP(q)
	q.d.setDeadline(q.rtoAt)
}

// retire completes finished WQEs from the head, in order.
func (q *qp) retire(now int64) {
	for q.sqHead < q.sqTail {
		w := q.slot(q.sqHead)
		if !w.done {
			break
		}
		if w.status != verbs.WCSuccess || w.flags&verbs.SendSignaled != 0 {
			q.scq.push(verbs.WC{WRID: w.wrid, Status: w.status, Opcode: sendWCOpcode(w.op), ByteLen: w.length, QPN: q.qpn}, false)
		}
		w.segs = nil
		q.sqHead++
		if q.sqNext < q.sqHead {
			q.sqNext = q.sqHead
		}
	}
}

func sendWCOpcode(op verbs.Opcode) verbs.WCOpcode {
	switch op {
	case verbs.OpRDMAWrite, verbs.OpRDMAWriteImm:
		return verbs.WCRDMAWrite
	case verbs.OpRDMARead:
		return verbs.WCRDMARead
	}
	return verbs.WCSend
}

// find returns the index of the transmitted WQE carrying psn.
func (q *qp) find(psn uint32) (uint64, bool) {
	for i := q.sqHead; i < q.sqNext; i++ {
		if q.slot(i).psn == psn {
			return i, true
		}
	}
	return 0, false
}

// onNak handles a NAK for psn: everything before it is acknowledged; psn
// itself is retried after the RNR timer or fails the QP.
func (q *qp) onNak(h *header, now int64) {
	q.onAck(h.psn-1, now)
	i, ok := q.find(h.psn)
	if !ok {
		return
	}
	w := q.slot(i)
	switch h.syndrome {
	case nakRNR:
		q.d.stats.RNRNaksReceived++
		q.rnrNaks.Add(1)
		if q.rnrRetry != verbs.RNRRetryInfinite {
			if w.rnrLeft == 0 {
				q.fail(w, verbs.WCRNRRetryExcErr, now)
				return
			}
			w.rnrLeft--
		}
		q.goBack(i)
		q.rnrUntil = now + int64(verbs.RNRTimer(h.rnrCode))
		q.d.addTimerQP(q)
		q.d.setDeadline(q.rnrUntil)
	case nakInvReq:
		q.fail(w, verbs.WCRemInvReqErr, now)
	case nakRemAccess:
		q.fail(w, verbs.WCRemAccessErr, now)
	default:
		q.fail(w, verbs.WCRemOpErr, now)
	}
}

// goBack rewinds transmission to WQE i: it and everything after it will
// be sent again, and the copies still queued are dropped. Reads before i
// have been answered (responses precede the NAK on the wire), so none is
// outstanding any more.
func (q *qp) goBack(i uint64) {
	for _, l := range q.d.links {
		l.cancel(q, true)
	}
	q.sqNext = i
	q.d.readsDelta(-q.readsOut)
	q.readsOut = 0
	q.rtoAt = 0
}

// onTimer fires the QP's due timers.
func (q *qp) onTimer(now int64) {
	if q.ackDeadline != 0 && now >= q.ackDeadline {
		q.sendAck(now)
	}
	if q.rnrUntil != 0 && now >= q.rnrUntil {
		q.rnrUntil = 0
		q.d.stats.Retries++
		q.pump(now)
	}
	if q.rtoAt != 0 && now >= q.rtoAt {
		q.rtoAt = 0
		i := q.sqHead
		for i < q.sqNext && q.slot(i).done {
			i++
		}
		if i == q.sqNext {
			return
		}
		if q.retriesLeft == 0 {
			q.fail(q.slot(i), verbs.WCRetryExcErr, now)
			return
		}
		q.retriesLeft--
		q.d.stats.Retries++
		q.d.stats.TimeoutRetries++
		q.goBack(i)
		q.pump(now)
	}
}

// deadline is the QP's earliest pending timer (0: none).
func (q *qp) deadline() int64 {
	t := int64(0)
	for _, x := range [...]int64{q.ackDeadline, q.rnrUntil, q.rtoAt} {
		if x != 0 && (t == 0 || x < t) {
			t = x
		}
	}
	return t
}

// fail completes w with status and moves the QP to ERR.
func (q *qp) fail(w *swqe, status verbs.WCStatus, now int64) {
	if !w.done {
		w.done = true
		w.status = status
	}
	q.toErr(now)
}

// linkLost fails the QP because its link went away: the oldest request on
// the wire completes with "transport retry counter exceeded", as it would
// on hardware once the retries to a dead peer ran out.
func (q *qp) linkLost(err error, now int64) {
	for i := q.sqHead; i < q.sqTail; i++ {
		if w := q.slot(i); !w.done {
			if w.sent {
				w.done, w.status = true, verbs.WCRetryExcErr
			}
			break
		}
	}
	q.out = nil
	q.toErr(now)
	q.d.raise(verbs.AsyncEvent{Type: verbs.EventQPFatal, QPN: q.qpn})
	_ = err
}

// toErr moves the QP to ERR: every outstanding work request completes,
// those not already failed with a flush error.
func (q *qp) toErr(now int64) {
	if q.state == verbs.QPErr {
		return
	}
	q.state = verbs.QPErr
	q.cancelAll()
	for i := q.sqHead; i < q.sqTail; i++ {
		if w := q.slot(i); !w.done {
			w.done, w.status = true, verbs.WCWRFlushErr
		}
	}
	q.sqNext = q.sqTail
	q.retire(now)
	q.d.readsDelta(-q.readsOut)
	q.readsOut, q.destReads = 0, 0
	q.clearTimers()
	q.flushRecv()
	if q.srq != nil {
		q.d.raise(verbs.AsyncEvent{Type: verbs.EventQPLastWQEReached, QPN: q.qpn})
	}
}

func (q *qp) flushRecv() {
	for q.rqHead < q.rqTail {
		w := &q.rq[q.rqHead%uint64(len(q.rq))]
		q.rcq.push(verbs.WC{WRID: w.wrid, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPN: q.qpn}, false)
		w.segs = nil
		q.rqHead++
	}
}

// ---- responder ----

// takeRecv consumes the receive WQE at the head of the QP's receive queue
// or SRQ (FIFO, whatever the message size).
func (q *qp) takeRecv() (rwqe, bool) {
	if q.srq != nil {
		return q.srq.take()
	}
	if q.rqHead == q.rqTail {
		return rwqe{}, false
	}
	w := q.rq[q.rqHead%uint64(len(q.rq))]
	q.rq[q.rqHead%uint64(len(q.rq))].segs = nil
	q.rqHead++
	return w, true
}

// scheduleAck notes that request psn was executed. The ACK goes out at
// once if the requester asked, if many are owed, or if the device's own
// goroutine did the work (the process is not polling, so no reply will
// come soon to carry it); otherwise it waits up to AckDelay for a packet
// going back to ride on.
func (q *qp) scheduleAck(psn uint32, now int64, force bool) {
	q.ackPending = true
	q.ackPSN = psn
	q.unacked++
	if force || q.unacked >= ackEvery || q.d.inNIC {
		q.sendAck(now)
		return
	}
	if q.ackDeadline == 0 {
		q.ackDeadline = now + q.d.ackDelay
		q.d.addTimerQP(q)
		q.d.setDeadline(q.ackDeadline)
	}
}

func (q *qp) sendAck(now int64) {
	q.ackPending, q.unacked, q.ackDeadline = false, 0, 0
	if q.out == nil || q.out.dead {
		return
	}
	h := header{op: opAck, dqpn: q.dqpn, sqpn: q.qpn, psn: q.ackPSN}
	q.out.enqueue(&h, nil, nil, nil, itemCtl, 0, now)
	q.d.stats.AcksSent++
}

func (q *qp) sendNak(psn uint32, syndrome, code uint8, now int64) {
	if q.out == nil || q.out.dead {
		return
	}
	h := header{op: opNak, dqpn: q.dqpn, sqpn: q.qpn, psn: psn, syndrome: syndrome, rnrCode: code}
	q.out.enqueue(&h, nil, nil, nil, itemCtl, 0, now)
}

func (d *Device) readsDelta(n int) {
	d.stats.ReadsOutstanding += int64(n)
	if d.stats.ReadsOutstanding > d.stats.ReadsOutstandingMax {
		d.stats.ReadsOutstandingMax = d.stats.ReadsOutstanding
	}
}

func (d *Device) setReadsGauge() {
	n := 0
	for _, q := range d.qps {
		n += q.readsOut
	}
	d.stats.ReadsOutstanding = int64(n)
}
