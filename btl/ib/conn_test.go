package ib

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
)

func TestBothSidesConnectingAtOnceMakeOneConnection(t *testing.T) {
	j := openJob(t, 2, jobOpts{})
	a, b := j.ep(0, 1), j.ep(1, 0)
	// Both send before either progresses: two REQs cross. The frames wait
	// on their endpoints until the connection is up.
	if err := a.Send(core.Header{Type: testType, Src: 0}, nil, []byte("from 0"), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(core.Header{Type: testType, Src: 1}, nil, []byte("from 1"), 0); err != nil {
		t.Fatal(err)
	}
	j.until("both frames", func() bool { return len(j.got[0]) == 1 && len(j.got[1]) == 1 })
	if !equalQPNs(a.conn.remote, qpns(b)) || !equalQPNs(b.conn.remote, qpns(a)) {
		t.Fatalf("the sides disagree on the connection: %v→%v, %v→%v", qpns(a), a.conn.remote, qpns(b), b.conn.remote)
	}
	// Each side created one QP per queue, not two sets.
	if n := len(j.mods[0].peers.byQPN); n != len(j.mods[0].rx.queues) {
		t.Fatalf("rank 0 has %d RC QPs for %d queues", n, len(j.mods[0].rx.queues))
	}
}

func TestAFrameClaimingAnotherSourceFailsTheConnection(t *testing.T) {
	j := openJob(t, 3, jobOpts{})
	var lost []int
	j.mods[1].OnPeerLost(func(r int, err error) {
		lost = append(lost, r)
		if !errors.Is(err, core.ErrPeerLost) {
			t.Errorf("loss error %v", err)
		}
	})
	j.send(0, 1, core.Header{Type: testType, Src: 0}, []byte("ok"))
	j.until("first", func() bool { return len(j.got[1]) == 1 })
	// Rank 0 claims to be rank 2.
	j.send(0, 1, core.Header{Type: testType, Src: 2}, []byte("liar"))
	j.until("the loss", func() bool { return len(lost) == 1 })
	if lost[0] != 0 || len(j.got[1]) != 1 || j.mods[1].rx.badFrames.Load() != 1 {
		t.Fatalf("lost %v, %d frames delivered, %d bad", lost, len(j.got[1]), j.mods[1].rx.badFrames.Load())
	}
}

func TestTwoPortsWithDifferentRatesAndTwoPathsAreSeparateModules(t *testing.T) {
	boots := newBoots(2)
	var mods [2][]*module
	for r := 0; r < 2; r++ {
		for _, blk := range []struct {
			inst   string
			params map[string]string
		}{
			{"rail0", map[string]string{"port": "1", "rate": "1GB/s"}},
			{"rail1", map[string]string{"port": "2", "rate": "250MB/s", "paths": "2"}},
		} {
			p := core.MustParams(Params)
			for k, v := range blk.params {
				if err := p.SetText(k, v); err != nil {
					t.Fatal(err)
				}
			}
			ms, err := openBTL(core.BTLEnv{Instance: blk.inst, Params: p, Boot: boots[r], Clock: core.SystemClock, Log: zerolog.Nop(), Metrics: core.NewMetrics()})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				mods[r] = append(mods[r], m.(*module))
				t.Cleanup(func() { m.Close() })
			}
		}
	}
	fence(boots)
	if len(mods[0]) != 3 {
		t.Fatalf("%d modules, want rail0 + two paths of rail1", len(mods[0]))
	}
	names := map[string]bool{}
	for i, m := range mods[0] {
		a := m.Attrs()
		names[a.Name] = true
		wantBW := 1e9
		if i > 0 {
			wantBW = 250e6
		}
		if a.Bandwidth != wantBW {
			t.Errorf("%s: bandwidth %v, want %v", a.Name, a.Bandwidth, wantBW)
		}
	}
	if len(names) != 3 || mods[0][0].h != mods[0][1].h {
		t.Fatalf("module names %v; modules share the device: %v", names, mods[0][0].h == mods[0][1].h)
	}
	// Every module carries traffic to the peer on its own connections.
	for i := range mods[0] {
		got := 0
		mods[1][i].Register(testType, func(*core.Header, []byte) { got++ })
		e, _ := mods[0][i].Endpoint(1)
		both := func() int { return mods[0][i].Progress() + mods[1][i].Progress() }
		retry(t, fmt.Sprintf("module %d's hello", i), func() error {
			return e.Send(core.Header{Type: testType, Src: 0}, nil, []byte("hello"), 0)
		}, both)
		msgtest.Until(t, fmt.Sprintf("module %d's hello", i), 20*time.Second, func() bool { return got > 0 }, both)
	}
	// A key from one module of a device works on another: one PD.
	buf := make([]byte, 4096)
	rg, err := mods[1][1].RegisterMem(buf, core.AccessRemoteWrite|core.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	src := fill(make([]byte, 4096), 9)
	lr, _ := mods[0][2].RegisterMem(src, core.AccessLocalWrite)
	d := &doneRec{}
	e, _ := mods[0][2].Endpoint(1)
	if err := e.(core.RDMA).Put(&core.RDMAOp{Local: src, Region: lr, Remote: rg.Key(), Done: d}); err != nil {
		t.Fatal(err) // connected by the hello above
	}
	msgtest.Until(t, "the put", 20*time.Second, func() bool { return d.n > 0 }, mods[0][2].Progress)
	mods[1][2].Progress()
	if len(d.errs) > 0 || buf[100] != src[100] {
		t.Fatalf("put across modules of a device: %v", d.errs)
	}
}

func TestASharedQueueGrowsOnItsLimitEvent(t *testing.T) {
	// Eight 2 KiB buffers with the limit at six; the policy may grow the
	// queue to 32.
	j := openJob(t, 2, jobOpts{params: map[string]string{"receive_queues": "P,128,8,6,4:S,2048,8,6,0:S,65536,4,2,0"}})
	q := j.mods[1].rx.queues[1]
	j.send(0, 1, core.Header{Type: testType, Tag: -1}, []byte("connect"))
	j.until("the connection", func() bool { return len(j.got[1]) == 1 })
	j.got[1] = nil
	const n = 30
	// Rank 1 does not progress: its device goroutine consumes buffers and
	// the SRQ runs below its limit.
	for i := 0; i < n; i++ {
		retry(t, fmt.Sprintf("frame %d", i), func() error {
			return j.ep(0, 1).Send(core.Header{Type: testType, Tag: int32(i)}, nil, make([]byte, 1000), 0)
		}, j.mods[0].Progress)
		j.mods[0].Progress()
	}
	j.until("every frame", func() bool { return len(j.got[1]) == n })
	// Async events are read every PolicyPollInterval.
	j.until("the limit event and the growth", func() bool { return q.limitEvts.Load() > 0 && q.allocated > 8 })
	if q.allocated <= 8 || q.allocated > 32 {
		t.Fatalf("the queue holds %d buffers, want grown above 8 and at most 32", q.allocated)
	}
	t.Logf("limit events %d, buffers %d, RNR NAKs sent %d", q.limitEvts.Load(), q.allocated, j.mods[1].h.soft.Stats().RNRNaksSent)
}

func TestAnUnknownPeerAddressIsUnreachable(t *testing.T) {
	j := openJob(t, 2, jobOpts{})
	j.mods[0].key = "btl.ib.nobody"
	err := j.ep(0, 1).Send(core.Header{Type: testType}, nil, []byte("x"), 0)
	if !errors.Is(err, core.ErrUnreachable) {
		t.Fatalf("send to a rank without a published address: %v", err)
	}
}

func TestExhaustedRNRRetriesFailEveryPendingRequestNamingThePeer(t *testing.T) {
	// Two shared 2 KiB buffers and one RNR retry: a receiver that stops
	// handling frames runs out of buffers and its sender's QP fails.
	j := openJob(t, 2, jobOpts{params: map[string]string{
		"receive_queues": "S,2048,2,0,0", "eager_limit": "1KiB", "rnr_retry": "1", "min_rnr_timer": "10us",
	}})
	var lostErr error
	j.mods[0].OnPeerLost(func(r int, err error) { lostErr = err })
	j.send(0, 1, core.Header{Type: testType}, []byte("connect"))
	j.until("the connection", func() bool { return len(j.got[1]) == 1 })
	// Rank 1 stops progressing: its device goroutine still takes frames
	// into the two posted buffers, and NAKs the rest.
	remote := make([]byte, 4096)
	rr, _ := j.mods[1].RegisterMem(remote, core.AccessRemoteRead|core.AccessLocalWrite)
	local := make([]byte, 4096)
	lr, _ := j.mods[0].RegisterMem(local, core.AccessLocalWrite)
	d := &doneRec{}
	e := j.ep(0, 1)
	for i := 0; i < 4; i++ {
		if err := e.Send(core.Header{Type: testType, Tag: int32(i)}, nil, []byte("stuck"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// A read queued behind the sends on the same QP fails with them.
	if err := e.Get(&core.RDMAOp{Local: local, Region: lr, Remote: rr.Key(), Done: d}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for lostErr == nil || d.n == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no failure after 10s (lost %v, read done %d)", lostErr, d.n)
		}
		j.mods[0].Progress()
	}
	for _, err := range []error{lostErr, d.errs[0], e.Send(core.Header{Type: testType}, nil, []byte("x"), 0)} {
		if !errors.Is(err, core.ErrPeerLost) || !strings.Contains(err.Error(), "peer 1") {
			t.Fatalf("error %v: want ErrPeerLost naming peer 1", err)
		}
	}
	if !strings.Contains(lostErr.Error(), "RNR retry counter exceeded") {
		t.Fatalf("the loss does not say why: %v", lostErr)
	}
	t.Log(lostErr)
}

// A peer hears that a rank dropped it from the connection manager's
// cmDrop alone: on hardware a QP in the error state tells the other end
// nothing until it sends, so Disconnect says it with a datagram. Here the
// QPs of rank 0 stay up, and rank 1 still reports rank 0 lost.
func TestADroppedPeerHearsItFromTheConnectionManager(t *testing.T) {
	j := openJob(t, 2, jobOpts{})
	var lost []error
	j.mods[1].OnPeerLost(func(r int, err error) {
		if r == 0 {
			lost = append(lost, err)
		}
	})
	j.send(0, 1, core.Header{Type: testType, Src: 0}, []byte("hello"))
	j.send(1, 0, core.Header{Type: testType, Src: 1}, []byte("hello"))
	j.until("the greetings", func() bool { return len(j.got[0]) == 1 && len(j.got[1]) == 1 })
	j.mods[0].cm.send(j.ep(0, 1), cmDrop)
	j.until("rank 1 hearing of it", func() bool { return len(lost) > 0 })
	if !errors.Is(lost[0], core.ErrPeerLost) || !strings.Contains(lost[0].Error(), "disconnected") {
		t.Fatalf("rank 1 lost rank 0 with %v, want ErrPeerLost and the disconnection", lost[0])
	}
	if j.ep(0, 1).state == epFailed {
		t.Fatal("rank 0's endpoint failed: the test meant to leave its QPs up")
	}
}
