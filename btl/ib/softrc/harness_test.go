package softrc

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
)

var devSeq atomic.Int64

// testKey is the job key of the tests' devices: they all belong to one job.
var testKey = core.NewJobKey()

// end is one side of a test connection: a device with a PD, a CQ on a
// completion channel and one RC QP.
type end struct {
	t    testing.TB
	dev  *Device
	pd   verbs.PD
	ch   verbs.CompChannel
	cq   verbs.CQ
	qp   verbs.QP
	port verbs.PortAttr
	wcs  []verbs.WC // completions polled so far
}

type endOpts struct {
	cfg       DeviceConfig
	port      PortConfig
	srq       verbs.SRQ
	sendWR    int
	recvWR    int
	sendSGE   int
	noQP      bool
	sharedDev *Device
}

func newEnd(t testing.TB, o endOpts) *end {
	t.Helper()
	d := o.sharedDev
	if d == nil {
		name := fmt.Sprintf("t%d", devSeq.Add(1))
		if o.cfg.Key == nil {
			o.cfg.Key = testKey
		}
		p := NewProvider()
		if err := p.Configure(name, o.cfg); err != nil {
			t.Fatal(err)
		}
		if err := p.ConfigurePort(name, 1, o.port); err != nil {
			t.Fatal(err)
		}
		var err error
		if d, err = p.OpenDevice(name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
	}
	e := &end{t: t, dev: d}
	var err error
	if e.port, err = d.QueryPort(1); err != nil {
		t.Fatal(err)
	}
	if e.pd, err = d.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.ch, err = d.CreateCompChannel(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = d.CreateCQ(4096, e.ch); err != nil {
		t.Fatal(err)
	}
	if o.noQP {
		return e
	}
	e.qp = e.newQP(o)
	return e
}

func (e *end) newQP(o endOpts) verbs.QP {
	e.t.Helper()
	if o.sendWR == 0 {
		o.sendWR = 256
	}
	if o.recvWR == 0 {
		o.recvWR = 256
	}
	if o.sendSGE == 0 {
		o.sendSGE = 2
	}
	qp, err := e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq, SRQ: o.srq,
		Cap: verbs.QPCap{MaxSendWR: o.sendWR, MaxRecvWR: o.recvWR, MaxSendSGE: o.sendSGE, MaxRecvSGE: 2}})
	if err != nil {
		e.t.Fatal(err)
	}
	return qp
}

// rcOpts are the connection attributes a test varies.
type rcOpts struct {
	rnrRetry, retryCnt, timeout, minRNR uint8
	maxRd, maxDestRd                    uint8
	access                              verbs.Access
}

func defaultRC() rcOpts {
	return rcOpts{rnrRetry: 7, retryCnt: 7, timeout: 18, minRNR: 1, maxRd: 4, maxDestRd: 4,
		access: verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessLocalWrite}
}

// connectQP takes qp through INIT, RTR and RTS towards the remote QP.
func connectQP(t testing.TB, qp verbs.QP, remote verbs.PortAttr, rqpn uint32, o rcOpts) {
	t.Helper()
	steps := []struct {
		a verbs.QPAttr
		m verbs.QPAttrMask
	}{
		{verbs.QPAttr{State: verbs.QPInit, Port: 1, AccessFlags: o.access}, verbs.RCInitMask},
		{verbs.QPAttr{State: verbs.QPRTR, AH: verbs.AHAttr{DLID: remote.LID, DGID: remote.GID, IsGlobal: true, PortNum: 1},
			PathMTU: verbs.MTU4096, DestQPN: rqpn, RQPSN: 100, MaxDestRdAtomic: o.maxDestRd, MinRNRTimer: o.minRNR}, verbs.RCRTRMask},
		{verbs.QPAttr{State: verbs.QPRTS, SQPSN: 100, Timeout: o.timeout, RetryCnt: o.retryCnt, RNRRetry: o.rnrRetry, MaxRdAtomic: o.maxRd}, verbs.RCRTSMask},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.a, s.m); err != nil {
			t.Fatalf("modify to %v: %v", s.a.State, err)
		}
	}
}

// connected is two ends on devices of their own, their QPs connected
// to each other with o.
func connected(t testing.TB, o rcOpts) (a, b *end) {
	t.Helper()
	a, b = newEnd(t, endOpts{}), newEnd(t, endOpts{})
	connect(t, a, b, o)
	return a, b
}

func connect(t testing.TB, a, b *end, o rcOpts) {
	t.Helper()
	connectQP(t, a.qp, b.port, b.qp.QPN(), o)
	connectQP(t, b.qp, a.port, a.qp.QPN(), o)
}

func (e *end) reg(n int, access verbs.Access) verbs.MR {
	e.t.Helper()
	m, err := e.pd.RegMR(make([]byte, n), access)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func sge(m verbs.MR, off, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: m.Addr() + uint64(off), Length: uint32(n), LKey: m.LKey()}}
}

func (e *end) postRecv(m verbs.MR, off, n int, id uint64) {
	e.t.Helper()
	if err := e.qp.PostRecv(&verbs.RecvWR{WRID: id, SG: sge(m, off, n)}); err != nil {
		e.t.Fatal(err)
	}
}

// recvs registers one buffer and posts receives of the given sizes in it,
// back to back and in order, with WRIDs 1, 2, ...
func (e *end) recvs(sizes ...int) verbs.MR {
	e.t.Helper()
	total := 0
	for _, n := range sizes {
		total += n
	}
	m := e.reg(total, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	off := 0
	for i, n := range sizes {
		e.postRecv(m, off, n, uint64(i+1))
		off += n
	}
	return m
}

func (e *end) post(wr verbs.SendWR) {
	e.t.Helper()
	if err := e.qp.PostSend(&wr); err != nil {
		e.t.Fatal(err)
	}
}

// poll moves this end's completions into e.wcs.
func (e *end) poll() {
	var buf [64]verbs.WC
	n, err := e.cq.Poll(buf[:])
	if err != nil {
		e.t.Fatal(err)
	}
	e.wcs = append(e.wcs, buf[:n]...)
}

// pollUntil polls every end until cond holds, failing after a deadline.
func pollUntil(t testing.TB, what string, cond func() bool, ends ...*end) {
	t.Helper()
	poll := func() int {
		for _, e := range ends {
			e.poll()
		}
		return 0
	}
	if err := msgtest.Poll(what, 10*time.Second, cond, poll); err != nil {
		for _, e := range ends {
			t.Logf("%s: %d completions: %+v; stats %+v", e.dev.name, len(e.wcs), e.wcs, e.dev.Stats())
		}
		t.Fatal(err)
	}
}

func (e *end) qpState() verbs.QPState {
	a, err := e.qp.Query()
	if err != nil {
		e.t.Fatal(err)
	}
	return a.State
}

func (e *end) count(op verbs.WCOpcode) int {
	n := 0
	for _, w := range e.wcs {
		if w.Opcode == op {
			n++
		}
	}
	return n
}

func (e *end) byID(id uint64) (verbs.WC, bool) {
	for _, w := range e.wcs {
		if w.WRID == id {
			return w, true
		}
	}
	return verbs.WC{}, false
}
