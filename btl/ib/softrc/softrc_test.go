package softrc

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"golang.org/x/sys/unix"
)

const allAccess = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead

func TestReceiveWQEsAreConsumedInFIFOOrderWhateverTheSize(t *testing.T) {
	a, b := connected(t, defaultRC())
	// A large buffer first, then two small ones: the first message, though
	// tiny, lands in the large one, as on hardware.
	rbuf := b.recvs(32768, 64, 64)
	sbuf := a.reg(4096, allAccess)
	msgs := []string{"one", "two-two", "three-three-three"}
	off := 0
	for i, m := range msgs {
		copy(sbuf.Bytes()[off:], m)
		a.post(verbs.SendWR{WRID: uint64(10 + i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sbuf, off, len(m))})
		off += len(m)
	}
	pollUntil(t, "three receives and three send completions", func() bool {
		return b.count(verbs.WCRecv) == 3 && a.count(verbs.WCSend) == 3
	}, a, b)
	offs := []int{0, 32768, 32768 + 64}
	for i, w := range b.wcs {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i+1) || int(w.ByteLen) != len(msgs[i]) {
			t.Fatalf("receive %d: %+v, want wrid %d, %d bytes", i, w, i+1, len(msgs[i]))
		}
		if got := string(rbuf.Bytes()[offs[i] : offs[i]+len(msgs[i])]); got != msgs[i] {
			t.Fatalf("receive %d holds %q, want %q", i, got, msgs[i])
		}
		if w.SrcQP != a.qp.QPN() {
			t.Fatalf("receive %d: source QP %#x, want %#x", i, w.SrcQP, a.qp.QPN())
		}
	}
	for i, w := range a.wcs {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(10+i) {
			t.Fatalf("send completion %d: %+v", i, w)
		}
	}
}

func TestAMessageLongerThanTheHeadBufferFailsBothQPs(t *testing.T) {
	a, b := connected(t, defaultRC())
	b.recvs(8, 56)
	sbuf := a.reg(64, allAccess)
	a.post(verbs.SendWR{WRID: 7, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sbuf, 0, 16)})
	a.post(verbs.SendWR{WRID: 8, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sbuf, 0, 4)})
	pollUntil(t, "error completions", func() bool { return len(a.wcs) == 2 && len(b.wcs) == 2 }, a, b)
	if w, _ := b.byID(1); w.Status != verbs.WCLocLenErr {
		t.Fatalf("responder completion %+v, want local length error", w)
	}
	if w, _ := b.byID(2); w.Status != verbs.WCWRFlushErr {
		t.Fatalf("second receive %+v, want flushed", w)
	}
	if w, _ := a.byID(7); w.Status != verbs.WCRemInvReqErr {
		t.Fatalf("requester completion %+v, want remote invalid request", w)
	}
	if w, _ := a.byID(8); w.Status != verbs.WCWRFlushErr {
		t.Fatalf("second send %+v, want flushed", w)
	}
	if a.qpState() != verbs.QPErr || b.qpState() != verbs.QPErr {
		t.Fatalf("QP states %v/%v, want ERR/ERR", a.qpState(), b.qpState())
	}
}

func TestRNRNakRetriesUntilAReceiveIsPostedAndLosesNothing(t *testing.T) {
	o := defaultRC()
	o.minRNR = verbs.RNRTimerCode(100 * time.Microsecond)
	a, b := connected(t, o)
	const n = 50
	sbuf := a.reg(n*8, allAccess)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(sbuf.Bytes()[i*8:], uint64(i))
		a.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sbuf, i*8, 8)})
	}
	// Nothing posted yet: the responder NAKs and the requester keeps
	// retrying (rnr_retry = 7 is forever).
	pollUntil(t, "RNR NAKs", func() bool { return b.dev.Stats().RNRNaksSent >= 3 }, a, b)
	if len(a.wcs) != 0 || len(b.wcs) != 0 {
		t.Fatalf("completions before any receive was posted: %+v / %+v", a.wcs, b.wcs)
	}
	rbuf := b.reg(n*8, allAccess)
	// Post receives a few at a time, so the sender is NAKed again between.
	for i := 0; i < n; i++ {
		b.postRecv(rbuf, i*8, 8, uint64(i))
		if i%10 == 9 {
			want := i + 1
			pollUntil(t, "a batch delivered", func() bool { return b.count(verbs.WCRecv) == want }, a, b)
		}
	}
	pollUntil(t, "all sends complete", func() bool { return a.count(verbs.WCSend) == n }, a, b)
	for i, w := range b.wcs {
		got := binary.LittleEndian.Uint64(rbuf.Bytes()[w.WRID*8:])
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i) || got != uint64(i) {
			t.Fatalf("receive %d: %+v holding %d", i, w, got)
		}
	}
	sa, sb := a.dev.Stats(), b.dev.Stats()
	if sb.RNRNaksSent == 0 || sa.RNRNaksReceived == 0 || sa.Retries == 0 {
		t.Fatalf("no RNR activity counted: requester %+v responder %+v", sa, sb)
	}
	t.Logf("RNR NAKs sent %d, received %d, retries %d", sb.RNRNaksSent, sa.RNRNaksReceived, sa.Retries)
}

func TestFiniteRNRRetryFailsTheRequestAndFlushesTheRest(t *testing.T) {
	o := defaultRC()
	o.rnrRetry = 2
	a, b := connected(t, o)
	sbuf := a.reg(64, allAccess)
	for i := 0; i < 3; i++ {
		a.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpSend, SG: sge(sbuf, 0, 8)})
	}
	pollUntil(t, "three error completions", func() bool { return len(a.wcs) == 3 }, a, b)
	want := []verbs.WCStatus{verbs.WCRNRRetryExcErr, verbs.WCWRFlushErr, verbs.WCWRFlushErr}
	for i, w := range a.wcs {
		if w.Status != want[i] || w.WRID != uint64(i) {
			t.Fatalf("completion %d: %+v, want %v", i, w, want[i])
		}
	}
	if st := a.qpState(); st != verbs.QPErr {
		t.Fatalf("requester QP in %v, want ERR", st)
	}
	if n := b.dev.Stats().RNRNaksSent; n != 3 {
		t.Fatalf("%d RNR NAKs, want 3 (the first try and rnr_retry = 2 retries)", n)
	}
	// A post on a QP in ERR completes at once with a flush error.
	a.post(verbs.SendWR{WRID: 9, Opcode: verbs.OpSend, SG: sge(sbuf, 0, 8)})
	pollUntil(t, "flushed post", func() bool { return len(a.wcs) == 4 }, a)
	if w := a.wcs[3]; w.WRID != 9 || w.Status != verbs.WCWRFlushErr {
		t.Fatalf("post in ERR: %+v", w)
	}
}

func TestRDMAWriteAndReadMoveRegisteredMemoryWithoutTheTarget(t *testing.T) {
	a, b := connected(t, defaultRC())
	const size = 3<<20 + 123
	src := a.reg(size, allAccess)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 7)
	}
	dst := b.reg(size+100, allAccess)
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled, SG: sge(src, 0, size), RemoteAddr: dst.Addr() + 100, RKey: dst.RKey()})
	// Only the initiator polls: the target's device goroutine places the
	// data once the target has been idle, as a NIC would.
	pollUntil(t, "write completion", func() bool { return len(a.wcs) == 1 }, a)
	if w := a.wcs[0]; w.Status != verbs.WCSuccess || w.Opcode != verbs.WCRDMAWrite {
		t.Fatalf("write completion %+v", w)
	}
	// The target learns of the data through its own device, as it would
	// through a FIN: synchronise with it before looking.
	b.dev.Stats()
	if !bytes.Equal(dst.Bytes()[100:], src.Bytes()) {
		t.Fatal("written data differs")
	}
	back := a.reg(size, allAccess)
	a.post(verbs.SendWR{WRID: 2, Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled, SG: sge(back, 0, size), RemoteAddr: dst.Addr() + 100, RKey: dst.RKey()})
	pollUntil(t, "read completion", func() bool { return len(a.wcs) == 2 }, a)
	if w := a.wcs[1]; w.Status != verbs.WCSuccess || w.Opcode != verbs.WCRDMARead || w.ByteLen != size {
		t.Fatalf("read completion %+v", w)
	}
	if !bytes.Equal(back.Bytes(), src.Bytes()) {
		t.Fatal("read data differs")
	}
	if len(b.wcs) != 0 {
		t.Fatalf("target saw completions: %+v", b.wcs)
	}
	if s := b.dev.Stats(); s.NICEngagements == 0 {
		t.Fatalf("target device goroutine never engaged: %+v", s)
	}
}

func TestRDMAWriteWithImmediateConsumesAReceive(t *testing.T) {
	a, b := connected(t, defaultRC())
	src := a.reg(100, allAccess)
	copy(src.Bytes(), "immediate")
	dst := b.reg(100, allAccess)
	rb := b.reg(16, allAccess)
	b.postRecv(rb, 0, 16, 77)
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpRDMAWriteImm, Flags: verbs.SendSignaled | verbs.SendSolicited, Imm: 0xfeed, SG: sge(src, 0, 9), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	a.post(verbs.SendWR{WRID: 2, Opcode: verbs.OpSendImm, Flags: verbs.SendSignaled, Imm: 0xbeef, SG: sge(src, 0, 4)})
	pollUntil(t, "completions", func() bool { return len(a.wcs) == 1 && len(b.wcs) == 1 && b.dev.Stats().RNRNaksSent > 0 }, a, b)
	w := b.wcs[0]
	if w.WRID != 77 || w.Opcode != verbs.WCRecvRDMAWithImm || w.Flags&verbs.WCWithImm == 0 || w.Imm != 0xfeed {
		t.Fatalf("write-with-imm completion %+v", w)
	}
	if string(dst.Bytes()[:9]) != "immediate" {
		t.Fatalf("target holds %q", dst.Bytes()[:9])
	}
	// The send with immediate found no receive left: it waits on RNR.
	if len(b.wcs) != 1 || len(a.wcs) != 1 || a.wcs[0].WRID != 1 {
		t.Fatalf("completions %+v / %+v, want the send still waiting", a.wcs, b.wcs)
	}
}

func TestRDMAKeyRangeAndAccessViolationsAreRemoteAccessErrors(t *testing.T) {
	cases := []struct {
		name   string
		op     verbs.Opcode
		access verbs.Access // of the target region
		key    func(m verbs.MR) uint32
		off    int64
		n      int
	}{
		{"a wrong key", verbs.OpRDMAWrite, allAccess, func(m verbs.MR) uint32 { return m.RKey() + 1 }, 0, 8},
		{"a write past the region's end", verbs.OpRDMAWrite, allAccess, verbs.MR.RKey, 60, 8},
		{"a read before the region's start", verbs.OpRDMARead, allAccess, verbs.MR.RKey, -8, 8},
		{"a write to a region without remote write", verbs.OpRDMAWrite, verbs.AccessLocalWrite | verbs.AccessRemoteRead, verbs.MR.RKey, 0, 8},
		{"a read of a region without remote read", verbs.OpRDMARead, verbs.AccessLocalWrite | verbs.AccessRemoteWrite, verbs.MR.RKey, 0, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := connected(t, defaultRC())
			local := a.reg(64, allAccess)
			target := b.reg(64, c.access)
			a.post(verbs.SendWR{WRID: 1, Opcode: c.op, Flags: verbs.SendSignaled, SG: sge(local, 0, c.n),
				RemoteAddr: uint64(int64(target.Addr()) + c.off), RKey: c.key(target)})
			a.post(verbs.SendWR{WRID: 2, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled, SG: sge(local, 0, 8),
				RemoteAddr: target.Addr(), RKey: target.RKey()})
			pollUntil(t, "error completions", func() bool { return len(a.wcs) == 2 }, a, b)
			if a.wcs[0].Status != verbs.WCRemAccessErr || a.wcs[1].Status != verbs.WCWRFlushErr {
				t.Fatalf("completions %+v, want remote access error then flush", a.wcs)
			}
			pollUntil(t, "responder QP in ERR", func() bool { return b.qpState() == verbs.QPErr }, a, b)
			if a.qpState() != verbs.QPErr {
				t.Fatalf("requester QP in %v", a.qpState())
			}
			ev, ok := b.dev.PollAsyncEvent()
			if !ok || ev.Type != verbs.EventQPAccessErr || ev.QPN != b.qp.QPN() {
				t.Fatalf("responder async event %+v %v, want QP access error", ev, ok)
			}
		})
	}
}

func TestOutstandingReadsAreBoundedByMaxRdAtomic(t *testing.T) {
	o := defaultRC()
	o.maxRd, o.maxDestRd = 2, 2
	a, b := connected(t, o)
	src := b.reg(1<<20, allAccess)
	dst := a.reg(6<<20, allAccess)
	for i := 0; i < 6; i++ {
		a.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled, SG: sge(dst, i<<20, 1<<20), RemoteAddr: src.Addr(), RKey: src.RKey()})
	}
	// Posted six, but only max_rd_atomic = 2 are on the wire.
	if s := a.dev.Stats(); s.ReadsOutstanding != 2 {
		t.Fatalf("%d reads outstanding after posting 6 with max_rd_atomic 2", s.ReadsOutstanding)
	}
	// A send posted behind the reads waits for them (the send queue is
	// processed in order).
	rb := b.reg(8, allAccess)
	b.postRecv(rb, 0, 8, 99)
	a.post(verbs.SendWR{WRID: 6, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(dst, 0, 8)})
	pollUntil(t, "all reads and the send", func() bool { return len(a.wcs) == 7 }, a, b)
	for i, w := range a.wcs {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i) {
			t.Fatalf("completion %d: %+v", i, w)
		}
	}
	if s := a.dev.Stats(); s.ReadsOutstandingMax != 2 || s.ReadsOutstanding != 0 {
		t.Fatalf("reads outstanding max %d now %d, want 2 and 0", s.ReadsOutstandingMax, s.ReadsOutstanding)
	}
}

func TestAResponderRejectsMoreReadsThanMaxDestRdAtomic(t *testing.T) {
	a, b := newEnd(t, endOpts{}), newEnd(t, endOpts{})
	oa, ob := defaultRC(), defaultRC()
	oa.maxRd, ob.maxDestRd = 8, 1
	connectQP(t, a.qp, b.port, b.qp.QPN(), oa)
	connectQP(t, b.qp, a.port, a.qp.QPN(), ob)
	// With the responder's device not serving (nobody polls it and its
	// goroutine sleeps until it has been idle), two reads arrive together.
	src := b.reg(4<<20, allAccess)
	dst := a.reg(8<<20, allAccess)
	for i := 0; i < 2; i++ {
		a.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled, SG: sge(dst, i<<22, 4<<20), RemoteAddr: src.Addr(), RKey: src.RKey()})
	}
	pollUntil(t, "completions", func() bool { return len(a.wcs) == 2 }, a, b)
	// The first response may still be on the wire when the second request
	// arrives: then the second is an invalid request.
	if a.wcs[0].Status == verbs.WCSuccess && a.wcs[1].Status == verbs.WCSuccess {
		t.Skip("the first read finished before the second arrived; no overlap to reject")
	}
	if a.wcs[1].Status != verbs.WCRemInvReqErr && a.wcs[0].Status != verbs.WCRemInvReqErr {
		t.Fatalf("completions %+v, want a remote invalid request", a.wcs)
	}
}

func TestADroppedConnectionFailsTheQPsOnBothSides(t *testing.T) {
	a, b := connected(t, defaultRC())
	b.recvs(8, 8)
	sb := a.reg(64, allAccess)
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sb, 0, 8)})
	pollUntil(t, "first message", func() bool { return len(a.wcs) == 1 && len(b.wcs) == 1 }, a, b)
	n, err := a.dev.DropLinks(1, verbs.GID{}, 0)
	if err != nil || n == 0 {
		t.Fatalf("DropLinks: %d links, %v", n, err)
	}
	a.post(verbs.SendWR{WRID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sb, 0, 8)})
	pollUntil(t, "failures on both sides", func() bool { return len(a.wcs) == 2 && len(b.wcs) == 2 }, a, b)
	if w := a.wcs[1]; w.Status != verbs.WCWRFlushErr {
		t.Fatalf("send after the drop: %+v", w)
	}
	if w := b.wcs[1]; w.WRID != 2 || w.Status != verbs.WCWRFlushErr {
		t.Fatalf("receive at the far side: %+v", w)
	}
	for _, e := range []*end{a, b} {
		if st := e.qpState(); st != verbs.QPErr {
			t.Fatalf("%s QP in %v", e.dev.name, st)
		}
		ev, ok := e.dev.PollAsyncEvent()
		if !ok || ev.Type != verbs.EventQPFatal || ev.QPN != e.qp.QPN() {
			t.Fatalf("%s async event %+v %v, want QP fatal", e.dev.name, ev, ok)
		}
	}
}

func TestAnInFlightRequestOnADroppedLinkFailsWithRetryExceeded(t *testing.T) {
	a, b := connected(t, defaultRC())
	sb := a.reg(64, allAccess)
	// No receive at b: the send sits in RNR retries until the link drops.
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sb, 0, 8)})
	pollUntil(t, "an RNR NAK", func() bool { return a.dev.Stats().RNRNaksReceived > 0 }, a, b)
	if _, err := b.dev.DropLinks(1, verbs.GID{}, 0); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "failure", func() bool { return len(a.wcs) == 1 }, a, b)
	if w := a.wcs[0]; w.Status != verbs.WCRetryExcErr {
		t.Fatalf("in-flight send: %+v, want retry exceeded", w)
	}
}

func TestAPacketForAQPNotYetReadyIsRetriedAfterTheAckTimeout(t *testing.T) {
	a, b := newEnd(t, endOpts{}), newEnd(t, endOpts{})
	o := defaultRC()
	o.timeout = 12 // 16.8 ms
	connectQP(t, a.qp, b.port, b.qp.QPN(), o)
	sb := a.reg(64, allAccess)
	copy(sb.Bytes(), "late")
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sb, 0, 4)})
	// b's QP is still in RESET: the packet is dropped.
	pollUntil(t, "the drop", func() bool { return b.dev.Stats().Drops > 0 }, a, b)
	connectQP(t, b.qp, a.port, a.qp.QPN(), o)
	rb := b.reg(64, allAccess)
	b.postRecv(rb, 0, 64, 5)
	pollUntil(t, "delivery after the retry", func() bool { return len(a.wcs) == 1 && len(b.wcs) == 1 }, a, b)
	if a.wcs[0].Status != verbs.WCSuccess || string(rb.Bytes()[:4]) != "late" {
		t.Fatalf("completion %+v, data %q", a.wcs[0], rb.Bytes()[:4])
	}
	if s := a.dev.Stats(); s.TimeoutRetries == 0 {
		t.Fatalf("no timeout retry counted: %+v", s)
	}
}

func TestRetryCountExhaustedFailsWithRetryExceeded(t *testing.T) {
	a, b := newEnd(t, endOpts{}), newEnd(t, endOpts{})
	o := defaultRC()
	o.timeout, o.retryCnt = 8, 2 // ~1 ms, two retries
	connectQP(t, a.qp, b.port, b.qp.QPN(), o)
	sb := a.reg(64, allAccess)
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sb, 0, 4)})
	pollUntil(t, "failure", func() bool { return len(a.wcs) == 1 }, a, b)
	if w := a.wcs[0]; w.Status != verbs.WCRetryExcErr {
		t.Fatalf("completion %+v", w)
	}
	if s := a.dev.Stats(); s.TimeoutRetries != 2 {
		t.Fatalf("%d timeout retries, want 2", s.TimeoutRetries)
	}
}

func TestSolicitedOnlyNotificationIgnoresUnsolicitedMessages(t *testing.T) {
	a, b := connected(t, defaultRC())
	rb := b.reg(64, allAccess)
	for i := 0; i < 4; i++ {
		b.postRecv(rb, i*16, 16, uint64(i))
	}
	if err := b.cq.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	sb := a.reg(16, allAccess)
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sb, 0, 8)})
	pollUntil(t, "unsolicited delivery", func() bool { return len(b.wcs) == 1 }, a, b)
	select {
	case <-b.ch.Ready():
		t.Fatal("an unsolicited message raised an event")
	default:
	}
	a.post(verbs.SendWR{WRID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendSolicited, SG: sge(sb, 0, 8)})
	a.post(verbs.SendWR{WRID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendSolicited, SG: sge(sb, 0, 8)})
	// Nobody polls b: its device goroutine delivers and raises the event.
	select {
	case <-b.ch.Ready():
	case <-time.After(10 * time.Second):
		pollUntil(t, "sends", func() bool { return len(a.wcs) == 3 }, a)
		t.Fatal("no event for a solicited message")
	}
	cq, ok := b.ch.GetEvent()
	if !ok || cq != b.cq {
		t.Fatalf("GetEvent: %v %v", cq, ok)
	}
	b.cq.AckEvents(1)
	// One arming, one event: the second solicited message raised none.
	pollUntil(t, "both solicited deliveries", func() bool { return len(b.wcs) == 3 }, a, b)
	if _, ok := b.ch.GetEvent(); ok {
		t.Fatal("a second event without re-arming")
	}
}

func TestNextCompletionNotificationFiresOnAReadCompletion(t *testing.T) {
	a, b := connected(t, defaultRC())
	src := b.reg(1<<20, allAccess)
	dst := a.reg(1<<20, allAccess)
	if err := a.cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled, SG: sge(dst, 0, 1<<20), RemoteAddr: src.Addr(), RKey: src.RKey()})
	// Neither side polls: both device goroutines carry the read.
	select {
	case <-a.ch.Ready():
	case <-time.After(10 * time.Second):
		t.Fatalf("no event for the read completion; stats %+v / %+v", a.dev.Stats(), b.dev.Stats())
	}
	a.poll()
	if len(a.wcs) != 1 || a.wcs[0].Status != verbs.WCSuccess {
		t.Fatalf("completions %+v", a.wcs)
	}
}

func TestUDDatagramsCarryAGRHAndAreDroppedWithoutABuffer(t *testing.T) {
	a := newEnd(t, endOpts{noQP: true})
	b := newEnd(t, endOpts{noQP: true})
	mk := func(e *end) verbs.QP {
		q, err := e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: e.cq, RecvCQ: e.cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			a verbs.QPAttr
			m verbs.QPAttrMask
		}{
			{verbs.QPAttr{State: verbs.QPInit, Port: 1, QKey: 0x1234}, verbs.UDInitMask},
			{verbs.QPAttr{State: verbs.QPRTR}, verbs.UDRTRMask},
			{verbs.QPAttr{State: verbs.QPRTS, SQPSN: 1}, verbs.UDRTSMask},
		} {
			if err := q.Modify(&s.a, s.m); err != nil {
				t.Fatal(err)
			}
		}
		return q
	}
	a.qp, b.qp = mk(a), mk(b)
	ah, err := a.pd.CreateAH(verbs.AHAttr{DLID: b.port.LID, DGID: b.port.GID, IsGlobal: true, PortNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	sb := a.reg(64, allAccess)
	copy(sb.Bytes(), "datagram")
	// No buffer at b: lost.
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(sb, 0, 8), AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x1234})
	pollUntil(t, "the loss", func() bool { return b.dev.Stats().Drops == 1 && len(a.wcs) == 1 }, a, b)
	rb := b.reg(128, allAccess)
	b.postRecv(rb, 0, 128, 3)
	a.post(verbs.SendWR{WRID: 2, Opcode: verbs.OpSendImm, Imm: 42, Flags: verbs.SendSignaled, SG: sge(sb, 0, 8), AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x1234})
	pollUntil(t, "delivery", func() bool { return len(b.wcs) == 1 }, a, b)
	w := b.wcs[0]
	if w.Status != verbs.WCSuccess || w.ByteLen != grhSize+8 || w.SrcQP != a.qp.QPN() || w.SLID != a.port.LID || w.Flags&verbs.WCGRH == 0 || w.Imm != 42 {
		t.Fatalf("UD completion %+v", w)
	}
	if string(rb.Bytes()[grhSize:grhSize+8]) != "datagram" || !bytes.Equal(rb.Bytes()[8:24], a.port.GID[:]) {
		t.Fatalf("UD buffer %q", rb.Bytes()[:grhSize+8])
	}
}

func TestSRQLimitRaisesOneEventWhenPostedFallsBelowIt(t *testing.T) {
	a := newEnd(t, endOpts{})
	b := newEnd(t, endOpts{noQP: true})
	srq, err := b.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.qp = b.newQP(endOpts{srq: srq})
	connect(t, a, b, defaultRC())
	rb := b.reg(16*16, allAccess)
	for i := 0; i < 8; i++ {
		if err := srq.PostRecv(&verbs.RecvWR{WRID: uint64(i), SG: sge(rb, i*16, 16)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srq.Arm(6); err != nil {
		t.Fatal(err)
	}
	sb := a.reg(16, allAccess)
	for i := 0; i < 2; i++ {
		a.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpSend, SG: sge(sb, 0, 4)})
	}
	pollUntil(t, "two receives", func() bool { return len(b.wcs) == 2 }, a, b)
	if _, ok := b.dev.PollAsyncEvent(); ok {
		t.Fatal("limit event with 6 still posted (limit 6)")
	}
	a.post(verbs.SendWR{WRID: 2, Opcode: verbs.OpSend, SG: sge(sb, 0, 4)})
	a.post(verbs.SendWR{WRID: 3, Opcode: verbs.OpSend, SG: sge(sb, 0, 4)})
	pollUntil(t, "four receives", func() bool { return len(b.wcs) == 4 }, a, b)
	ev, ok := b.dev.PollAsyncEvent()
	if !ok || ev.Type != verbs.EventSRQLimitReached || ev.SRQ != srq {
		t.Fatalf("event %+v %v, want SRQ limit reached", ev, ok)
	}
	if _, ok := b.dev.PollAsyncEvent(); ok {
		t.Fatal("the limit event fired twice without re-arming")
	}
	if at, _ := srq.Query(); at.Limit != 0 {
		t.Fatalf("limit %d after the event, want disarmed", at.Limit)
	}
}

func TestInjectedDelayHoldsPacketsBack(t *testing.T) {
	a, b := connected(t, defaultRC())
	b.recvs(16)
	if err := a.dev.DelayLinks(1, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	sb := a.reg(16, allAccess)
	start := time.Now()
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, SG: sge(sb, 0, 4)})
	pollUntil(t, "delayed delivery", func() bool { return len(b.wcs) == 1 }, a, b)
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("delivered after %v despite a 20ms delay", el)
	}
}

func TestAKilledPortFailsItsQPsAndRaisesPortError(t *testing.T) {
	a, b := connected(t, defaultRC())
	rb := b.reg(16, allAccess)
	b.postRecv(rb, 0, 16, 1)
	if err := a.dev.KillPort(1); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "far side failure", func() bool { return len(b.wcs) == 1 }, a, b)
	if b.wcs[0].Status != verbs.WCWRFlushErr || a.qpState() != verbs.QPErr {
		t.Fatalf("far side %+v, near QP %v", b.wcs[0], a.qpState())
	}
	var sawPortErr bool
	for {
		ev, ok := a.dev.PollAsyncEvent()
		if !ok {
			break
		}
		sawPortErr = sawPortErr || (ev.Type == verbs.EventPortErr && ev.Port == 1)
	}
	if !sawPortErr {
		t.Fatal("no port error event")
	}
	if pa, _ := a.dev.QueryPort(1); pa.State != verbs.PortDown {
		t.Fatalf("port state %v", pa.State)
	}
	q := a.newQP(endOpts{})
	err := q.Modify(&verbs.QPAttr{State: verbs.QPInit, Port: 1, AccessFlags: allAccess}, verbs.RCInitMask)
	if err == nil {
		t.Fatal("a QP came up on a dead port")
	}
}

func TestStateMachineRejectsSkippedTransitionsAndMissingAttributes(t *testing.T) {
	a := newEnd(t, endOpts{})
	if err := a.qp.Modify(&verbs.QPAttr{State: verbs.QPRTS}, verbs.RCRTSMask); err == nil {
		t.Fatal("RESET → RTS accepted")
	}
	if err := a.qp.Modify(&verbs.QPAttr{State: verbs.QPInit, Port: 1}, verbs.QPAttrState|verbs.QPAttrPort); err == nil {
		t.Fatal("RESET → INIT without access flags and pkey index accepted")
	}
	sb := a.reg(8, allAccess)
	if err := a.qp.PostSend(&verbs.SendWR{Opcode: verbs.OpSend, SG: sge(sb, 0, 8)}); err == nil {
		t.Fatal("post send in RESET accepted")
	}
}

// An armed CQ hands the wire to the device goroutine at once: its
// consumer sleeps until an event (seed 004 §4.3's progress thread) and
// polls no more. With idle_after an hour, the device would otherwise take
// over — read the solicited message, raise the event — an hour later; the
// process that armed does not poll here at all.
func TestAnArmedCQHasItsEventRaisedWithoutWaitingForIdleAfter(t *testing.T) {
	a := newEnd(t, endOpts{})
	b := newEnd(t, endOpts{cfg: DeviceConfig{IdleAfter: time.Hour}})
	// b's device answers the connection's handshake only while polled.
	stop, polled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		var wc [4]verbs.WC
		for {
			select {
			case <-stop:
				return
			default:
				b.cq.Poll(wc[:])
			}
		}
	}()
	connect(t, a, b, defaultRC())
	close(stop)
	<-polled
	rb := b.reg(64, allAccess)
	b.postRecv(rb, 0, 16, 1)
	b.poll() // b has polled just now: idle_after is an hour away
	if err := b.cq.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	sb := a.reg(16, allAccess)
	a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendSolicited, SG: sge(sb, 0, 8)})
	select {
	case <-b.ch.Ready():
	case <-time.After(10 * time.Second):
		t.Fatalf("no event for a solicited message to an armed CQ whose process does not poll; stats %+v", b.dev.Stats())
	}
	if s := b.dev.Stats(); s.NICEngagements == 0 {
		t.Fatalf("the event came without the device goroutine: stats %+v", s)
	}
}

// nicCPU counts a negative choice from the last allowed CPU, so that the
// NIC threads of a node's ranks take different CPUs.
func TestTheNICsOfANodesRanksTakeCPUsFromTheLast(t *testing.T) {
	var set unix.CPUSet
	for _, c := range []int{0, 1, 4, 5} {
		set.Set(c)
	}
	for _, c := range []struct{ want, cpu int }{{-1, 5}, {-2, 4}, {-3, 1}, {-4, 0}, {-5, -1}, {2, 2}} {
		if got := nicCPU(&set, c.want); got != c.cpu {
			t.Errorf("nicCPU(%d) = %d, want %d", c.want, got, c.cpu)
		}
	}
}
