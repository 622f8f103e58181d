package simrc

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/sim"
)

// pair is two connected RC QPs on the devices of ranks 0 and 1.
type pair struct {
	s   *sim.Sched
	d   [2]*Device
	pd  [2]verbs.PD
	cq  [2]verbs.CQ
	qp  [2]verbs.QP
	srq verbs.SRQ
	mr  [2]verbs.MR
	buf [2][]byte
}

// setup connects the pair; with srq the responder (rank 1) takes its
// receives from an SRQ of srqMax WQEs.
func setup(t *testing.T, s *sim.Sched, withSRQ bool, rnrRetry, maxRd uint8) *pair {
	p := &pair{s: s}
	f := FabricOf(s)
	for i := 0; i < 2; i++ {
		dev, err := (&Provider{f: f, rank: i}).Open("sim0")
		if err != nil {
			t.Fatal(err)
		}
		p.d[i] = dev.(*Device)
		p.pd[i], _ = dev.AllocPD()
		p.cq[i], _ = dev.CreateCQ(256, nil)
		p.buf[i] = make([]byte, 1<<16)
		p.mr[i], _ = p.pd[i].RegMR(p.buf[i], verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	}
	if withSRQ {
		p.srq, _ = p.pd[1].CreateSRQ(verbs.SRQInitAttr{MaxWR: 64, MaxSGE: 1})
	}
	for i := 0; i < 2; i++ {
		a := verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: p.cq[i], RecvCQ: p.cq[i], Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}}
		if i == 1 && withSRQ {
			a.SRQ = p.srq
		}
		q, err := p.pd[i].CreateQP(a)
		if err != nil {
			t.Fatal(err)
		}
		p.qp[i] = q
	}
	for i := 0; i < 2; i++ {
		pa, _ := p.d[1-i].QueryPort(1)
		q := p.qp[i]
		steps := []struct {
			a verbs.QPAttr
			m verbs.QPAttrMask
		}{
			{verbs.QPAttr{State: verbs.QPInit, Port: 1, AccessFlags: verbs.AccessRemoteRead | verbs.AccessRemoteWrite}, verbs.RCInitMask},
			{verbs.QPAttr{State: verbs.QPRTR, AH: verbs.AHAttr{DLID: pa.LID, DGID: pa.GID, IsGlobal: true}, DestQPN: p.qp[1-i].QPN(),
				MinRNRTimer: verbs.RNRTimerCode(10 * time.Microsecond), MaxDestRdAtomic: maxRd}, verbs.RCRTRMask},
			{verbs.QPAttr{State: verbs.QPRTS, Timeout: 14, RetryCnt: 7, RNRRetry: rnrRetry, MaxRdAtomic: maxRd}, verbs.RCRTSMask},
		}
		for _, st := range steps {
			if err := q.Modify(&st.a, st.m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}

func (p *pair) sge(i, off, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: p.mr[i].Addr() + uint64(off), Length: uint32(n), LKey: p.mr[i].LKey()}}
}

// poll waits (in virtual time) for n completions on rank i's CQ.
func (p *pair) poll(i, n int) []verbs.WC {
	var out []verbs.WC
	wc := make([]verbs.WC, 16)
	for len(out) < n {
		k, _ := p.cq[i].Poll(wc)
		out = append(out, wc[:k]...)
		if k == 0 {
			p.s.Compute(time.Microsecond)
		}
	}
	return out
}

func run(t *testing.T, fn func(s *sim.Sched) error) {
	t.Helper()
	// Rank 0 drives both devices; rank 1 only owns the second.
	s := sim.New(t.Name(), 2, sim.Options{})
	err := s.Run(func(r int) error {
		if r == 1 {
			return nil
		}
		return fn(s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestASendWithoutAReceiveIsRNRNakedAndRetriedInOrder(t *testing.T) {
	run(t, func(s *sim.Sched) error {
		p := setup(t, s, false, verbs.RNRRetryInfinite, 4)
		for k := 0; k < 3; k++ {
			copy(p.buf[0][k*100:], fmt.Sprintf("message %d", k))
			if err := p.qp[0].PostSend(&verbs.SendWR{WRID: uint64(k), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: p.sge(0, k*100, 9)}); err != nil {
				return err
			}
		}
		s.Compute(100 * time.Microsecond) // the responder posts late
		for k := 0; k < 3; k++ {
			p.qp[1].PostRecv(&verbs.RecvWR{WRID: uint64(10 + k), SG: p.sge(1, 1000+k*100, 100)})
		}
		got := p.poll(1, 3)
		for k, wc := range got {
			if wc.Status != verbs.WCSuccess || wc.WRID != uint64(10+k) || !bytes.Equal(p.buf[1][1000+k*100:1009+k*100], []byte(fmt.Sprintf("message %d", k))) {
				return fmt.Errorf("receive %d: %+v %q", k, wc, p.buf[1][1000+k*100:1009+k*100])
			}
		}
		sent := p.poll(0, 3)
		for k, wc := range sent {
			if wc.Status != verbs.WCSuccess || wc.WRID != uint64(k) {
				return fmt.Errorf("send completion %d: %+v", k, wc)
			}
		}
		if p.d[0].Stats().RNRNaks == 0 {
			return fmt.Errorf("no RNR NAK counted")
		}
		return nil
	})
}

func TestRNRRetryExhaustedFailsTheQP(t *testing.T) {
	run(t, func(s *sim.Sched) error {
		p := setup(t, s, false, 2, 4)
		p.qp[0].PostSend(&verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: p.sge(0, 0, 8)})
		wc := p.poll(0, 1)[0]
		if wc.Status != verbs.WCRNRRetryExcErr || p.d[0].Stats().RNRNaks != 3 {
			return fmt.Errorf("got %v after %d NAKs, want RNR retry exceeded after 3", wc.Status, p.d[0].Stats().RNRNaks)
		}
		if a, _ := p.qp[0].Query(); a.State != verbs.QPErr {
			return fmt.Errorf("QP in %v", a.State)
		}
		return nil
	})
}

func TestTheSRQLimitEventFiresOnceBelowTheLimit(t *testing.T) {
	run(t, func(s *sim.Sched) error {
		p := setup(t, s, true, verbs.RNRRetryInfinite, 4)
		for k := 0; k < 4; k++ {
			p.srq.PostRecv(&verbs.RecvWR{WRID: uint64(k), SG: p.sge(1, k*100, 100)})
		}
		p.srq.Arm(3)
		for k := 0; k < 3; k++ {
			p.qp[0].PostSend(&verbs.SendWR{WRID: uint64(k), Opcode: verbs.OpSend, SG: p.sge(0, 0, 8)})
		}
		p.poll(1, 3)
		n := 0
		for {
			ev, ok := p.d[1].PollAsyncEvent()
			if !ok {
				break
			}
			if ev.Type == verbs.EventSRQLimitReached {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d SRQ limit events, want 1", n)
		}
		return nil
	})
}

func TestReadsOutstandingAreBoundedByMaxRdAtomic(t *testing.T) {
	run(t, func(s *sim.Sched) error {
		p := setup(t, s, false, verbs.RNRRetryInfinite, 2)
		copy(p.buf[1][4096:], "remote data")
		for k := 0; k < 6; k++ {
			p.qp[0].PostSend(&verbs.SendWR{WRID: uint64(k), Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled, SG: p.sge(0, k*64, 11),
				RemoteAddr: p.mr[1].Addr() + 4096, RKey: p.mr[1].RKey()})
		}
		for k, wc := range p.poll(0, 6) {
			if wc.Status != verbs.WCSuccess || wc.WRID != uint64(k) || string(p.buf[0][k*64:k*64+11]) != "remote data" {
				return fmt.Errorf("read %d: %+v", k, wc)
			}
		}
		if m := p.d[0].Stats().MaxReadsOutstanding; m != 2 {
			return fmt.Errorf("%d reads outstanding at most, want 2", m)
		}
		return nil
	})
}

func TestARemoteKeyViolationFailsBothQPs(t *testing.T) {
	run(t, func(s *sim.Sched) error {
		p := setup(t, s, false, verbs.RNRRetryInfinite, 2)
		p.qp[0].PostSend(&verbs.SendWR{WRID: 7, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled, SG: p.sge(0, 0, 8),
			RemoteAddr: p.mr[1].Addr() + 1<<16, RKey: p.mr[1].RKey()})
		if wc := p.poll(0, 1)[0]; wc.Status != verbs.WCRemAccessErr {
			return fmt.Errorf("got %v, want remote access error", wc.Status)
		}
		if a, _ := p.qp[1].Query(); a.State != verbs.QPErr {
			return fmt.Errorf("responder QP in %v", a.State)
		}
		return nil
	})
}
