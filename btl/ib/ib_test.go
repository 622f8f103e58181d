package ib

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/recvbuf/bsrq"
	"github.com/gobtl/gobtl/policies/recvbuf/perpeer"
)

func TestFramesOfEverySizeUseTheSmallestQueueThatHoldsThem(t *testing.T) {
	j := openJob(t, 2, jobOpts{})
	m := j.mods[0]
	sizes := []int{0, 1, 96, 97, 500, 2016, 2017, 12000, 16352, 16353, 40000, m.attrs.MaxSendSize}
	var want [][]byte
	for i, n := range sizes {
		d := fill(make([]byte, n), i)
		want = append(want, d)
		j.send(0, 1, core.Header{Type: testType, Tag: int32(i)}, d)
	}
	j.until("every frame", func() bool { return len(j.got[1]) == len(sizes) })
	j.checkFrames(1, want)
	// The default layout is P,128 / S,2048 / S,16384 / S,65536: each queue
	// saw exactly the frames that fit it and not the one below.
	perQueue := map[int]int{}
	for _, n := range sizes {
		perQueue[m.tx.queueFor(n+core.HeaderSize)]++
	}
	for i, q := range j.mods[1].rx.queues {
		if got := q.util.Snapshot().Count; got != int64(perQueue[i]) {
			t.Errorf("queue %d (%d B): %d frames, want %d", i, q.spec.BufSize, got, perQueue[i])
		}
	}
	if s := j.mods[1].rx.queues[0].util.Snapshot(); s.Mean <= 0 || s.Mean > 1 {
		t.Errorf("utilization mean %v", s.Mean)
	}
}

func TestBSRQDeliversEverySizeAndKeepsUtilizationHigh(t *testing.T) {
	j := openJob(t, 3, jobOpts{policy: layout(t, bsrq.New, bsrq.Params)})
	if n := len(j.mods[0].rx.queues); n != 9 {
		t.Fatalf("%d queues, want tiny + 8 buckets", n)
	}
	var want [][]byte
	for i := 0; i < 300; i++ {
		n := (i * 997) % (j.mods[0].attrs.MaxSendSize + 1)
		if i%3 == 0 {
			n = i % 120 // tiny frames
		}
		d := fill(make([]byte, n), i)
		want = append(want, d)
		j.send(i%2*2, 1, core.Header{Type: testType, Tag: int32(i), Src: int32(i % 2 * 2)}, d)
	}
	j.until("every frame", func() bool { return len(j.got[1]) == len(want) })
	j.checkFrames(1, want)
	for i, q := range j.mods[1].rx.queues[1:] {
		s := q.util.Snapshot()
		// A frame lands in bucket i only if it did not fit bucket i-1, so
		// every bucket above the first is more than half full.
		if i > 0 && s.Count > 0 && s.Mean <= 0.5 {
			t.Errorf("bucket %d (%d B): mean utilization %.2f, want > 0.5", i, q.spec.BufSize, s.Mean)
		}
	}
}

func TestCreditsHoldTheSenderBackAndReturnWithoutTraffic(t *testing.T) {
	// Four tiny per-peer buffers, credits back after two.
	j := openJob(t, 2, jobOpts{params: map[string]string{"receive_queues": "P,128,4,3,2:S,65536,16,12,4"}})
	e := j.ep(0, 1)
	// Connect first.
	j.send(0, 1, core.Header{Type: testType, Tag: 0}, []byte("hi"))
	j.until("connection", func() bool { return len(j.got[1]) == 1 })
	// Rank 1 does not progress: rank 0 runs out of credits after at most
	// four frames and is refused, without anything queued inside the BTL.
	sent := 1
	for ; sent < 40; sent++ {
		err := e.Send(core.Header{Type: testType, Tag: int32(sent)}, nil, []byte{byte(sent)}, 0)
		if errors.Is(err, core.ErrNoResources) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		j.mods[0].Progress()
	}
	if sent > 5 || j.mods[0].credit.stalls.Load() != 1 {
		t.Fatalf("sent %d frames to 4 buffers before a refusal (%d stalls)", sent, j.mods[0].credit.stalls.Load())
	}
	// The refused frame and the rest go when credits come back.
	const n = 40
	for i := sent; i < n; i++ {
		j.send(0, 1, core.Header{Type: testType, Tag: int32(i)}, []byte{byte(i)})
	}
	j.until("every frame", func() bool { return len(j.got[1]) == n })
	for i, f := range j.got[1] {
		if f.h.Tag != int32(i) {
			t.Fatalf("frame %d arrived as %d", i, f.h.Tag)
		}
	}
	// Rank 1 never sent a frame back: credits went back explicitly.
	if c := j.mods[1].credit.creditMsgs.Load(); c == 0 {
		t.Fatal("no explicit credit frame")
	}
	// The frame that waited, and each that waited after it, carried the
	// backlog bit.
	if tx, rx := j.mods[0].credit.backlogged.Load(), j.mods[1].credit.backlogRx.Load(); tx == 0 || tx != rx {
		t.Fatalf("%d frames sent with the backlog bit, %d received", tx, rx)
	}
}

func TestPerPeerLayoutRegistersBuffersPerConnectedPeerOnly(t *testing.T) {
	j := openJob(t, 4, jobOpts{policy: layout(t, perpeer.New, perpeer.Params)})
	before := j.mods[1].rx.recvBytes.Load()
	j.send(0, 1, core.Header{Type: testType}, []byte("x"))
	j.until("frame", func() bool { return len(j.got[1]) == 1 })
	// One peer connected: 8 × 4 KiB + 8 × 32 KiB registered for it.
	if got := j.mods[1].rx.recvBytes.Load() - before; got != 8*4096+8*32768 {
		t.Fatalf("registered %d receive bytes for one peer", got)
	}
	snap := j.metrics[1].Snapshot()
	if g := snap["ib.softrc0_1.posted.peer0"]; g == nil || g.(map[string]int64)["value"] != 16 {
		t.Fatalf("posted buffers for peer 0: %v", g)
	}
	// The peers never used have no endpoint, and no counters.
	for _, r := range []int{2, 3} {
		if g, ok := snap[fmt.Sprintf("ib.softrc0_1.posted.peer%d", r)]; ok {
			t.Fatalf("rank 1 has counters for rank %d, which it never talked to: %v", r, g)
		}
	}
}

type doneRec struct {
	n    int
	errs []error
}

func (d *doneRec) RDMADone(op *core.RDMAOp, err error) {
	d.n++
	if err != nil {
		d.errs = append(d.errs, err)
	}
}

func TestPutAndGetThroughTheRegistrationCache(t *testing.T) {
	j := openJob(t, 2, jobOpts{})
	remote := make([]byte, 1<<20)
	rr, err := j.mods[1].RegisterMem(remote, core.AccessRemoteRead|core.AccessRemoteWrite|core.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	local := fill(make([]byte, 1<<20), 5)
	lr, err := j.mods[0].RegisterMem(local, core.AccessLocalWrite|core.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	// A sub-slice is found in the cache.
	sub, err := j.mods[0].RegisterMem(local[100:200], core.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if c := j.mods[0].h.reg; c.hits != 1 || c.misses != 1 {
		t.Fatalf("cache hits %d misses %d, want 1 and 1", c.hits, c.misses)
	}
	j.mods[0].DeregisterMem(sub)
	e := j.ep(0, 1)
	d := &doneRec{}
	put := &core.RDMAOp{Local: local[1000:500000], Region: lr, Remote: rr.Key(), Offset: 77, Done: d}
	retry(t, "put", func() error { return e.Put(put) }, j.progress)
	j.until("put", func() bool { return d.n == 1 })
	j.mods[1].Progress() // synchronise with the target's device before looking
	if !bytes.Equal(remote[77:77+499000], local[1000:500000]) {
		t.Fatal("put data differs")
	}
	back := make([]byte, 4096)
	br, _ := j.mods[0].RegisterMem(back, core.AccessLocalWrite)
	get := &core.RDMAOp{Local: back, Region: br, Remote: rr.Key(), Offset: 77, Done: d, Solicited: true}
	if err := e.Get(get); err != nil {
		t.Fatal(err)
	}
	j.until("get", func() bool { return d.n == 2 })
	if !bytes.Equal(back, local[1000:1000+4096]) || len(d.errs) > 0 {
		t.Fatalf("get data differs (errors %v)", d.errs)
	}
	if err := e.Get(&core.RDMAOp{Local: back, Region: br, Remote: rr.Key(), Offset: 1<<20 - 10, Done: d}); err == nil {
		t.Fatal("a get beyond the remote region was accepted")
	}
}

func TestAKilledPeerIsReportedOnceAndSendsFailWithErrPeerLost(t *testing.T) {
	j := openJob(t, 3, jobOpts{})
	var lost []int
	var lostErr error
	j.mods[0].OnPeerLost(func(r int, err error) { lost = append(lost, r); lostErr = err })
	j.send(0, 1, core.Header{Type: testType}, []byte("a"))
	j.send(1, 0, core.Header{Type: testType, Src: 1}, []byte("b"))
	j.until("greetings", func() bool { return len(j.got[0]) == 1 && len(j.got[1]) == 1 })
	if err := j.mods[1].h.soft.KillPort(1); err != nil {
		t.Fatal(err)
	}
	j.mods[1].Close()
	j.mods = []*module{j.mods[0], j.mods[2]}
	j.until("OnPeerLost", func() bool { return len(lost) > 0 })
	if lost[0] != 1 || !errors.Is(lostErr, core.ErrPeerLost) {
		t.Fatalf("lost %v: %v", lost, lostErr)
	}
	err := j.ep(0, 1).Send(core.Header{Type: testType}, nil, []byte("?"), 0)
	if !errors.Is(err, core.ErrPeerLost) || !bytes.Contains([]byte(err.Error()), []byte("peer 1")) {
		t.Fatalf("send to the lost peer: %v", err)
	}
	// The survivors still talk.
	j.got[0] = nil
	j.send(1, 0, core.Header{Type: testType, Src: 2}, []byte("c")) // j.mods[1] is rank 2 now
	j.until("survivor", func() bool { return len(j.got[0]) == 1 })
	if len(lost) != 1 {
		t.Fatalf("lost reported %d times", len(lost))
	}
}
