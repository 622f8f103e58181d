package bsrq

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestDefaultLayoutIsTinyPerPeerPlusEightPowerOfTwoBuckets(t *testing.T) {
	c, ok := core.Lookup(core.KindRecvBuf, "bsrq")
	if !ok {
		t.Fatal("bsrq is not registered")
	}
	pol, err := c.NewPolicy(core.MustParams(c.Params))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pol.(core.RecvBuffers).Setup(core.RecvInfo{Peers: 15, EagerLimit: 12 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Queues) != 9 {
		t.Fatalf("%d queues, want 1 tiny + 8 buckets", len(s.Queues))
	}
	tiny := s.Queues[0]
	if tiny.Kind != core.QueuePerPeer || tiny.BufSize != 128+core.HeaderSize {
		t.Fatalf("tiny queue %+v, want per-peer 128 B + header", tiny)
	}
	slabShare := int64(4<<20) / 8
	for i, q := range s.Queues[1:] {
		r := 256 << i
		if q.Kind != core.QueueShared || q.BufSize != r || int64(q.Count) != slabShare/int64(r) || q.Max != 4*q.Count {
			t.Errorf("bucket %d: %+v, want shared %d-byte buffers × %d", i, q, r, slabShare/int64(r))
		}
	}
	if s.Queues[8].BufSize != 1<<15 {
		t.Fatalf("largest bucket %d, want 2^15", s.Queues[8].BufSize)
	}
}

func TestAnEagerLimitBeyondTheLargestBucketIsRefused(t *testing.T) {
	p, err := NewLayout(Layout{Tiny: 128, TinyCount: 4, TinyWindow: 2, Slab: 1 << 20, Buckets: 2, MinBucket: 256, Limit: 0.25, MaxFactor: 2, Grow: 0.5, SendFreeListMax: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Setup(core.RecvInfo{EagerLimit: 4096}); err == nil {
		t.Fatal("a 512-byte largest bucket accepted a 4 KiB eager limit")
	}
}

func TestALimitEventGrowsTheBucketAndRearms(t *testing.T) {
	p, err := NewLayout(Layout{Tiny: 128, TinyCount: 4, TinyWindow: 2, Slab: 1 << 20, Buckets: 2, MinBucket: 256, Limit: 0.25, MaxFactor: 2, Grow: 0.5, SendFreeListMax: 8})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Observe([]core.RecvEvent{{Kind: core.RecvLimit, Queue: 2, Posted: 100}}, nil)
	want := []core.RecvDecision{{Kind: core.RecvGrow, Queue: 2, Value: 512}, {Kind: core.RecvSetLimit, Queue: 2, Value: 256}}
	if len(d) != 2 || d[0] != want[0] || d[1] != want[1] {
		t.Fatalf("decisions %+v, want %+v", d, want)
	}
}
