package srq

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestSharedQueuesMayGrowToMaxFactorAndGrowOnTheirLimit(t *testing.T) {
	p, err := New(core.MustParams(Params))
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Setup(core.RecvInfo{Peers: 3, EagerLimit: 12 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if s.Queues[0].Kind != core.QueuePerPeer || s.Queues[0].Max != 0 {
		t.Fatalf("per-peer queue %+v", s.Queues[0])
	}
	q := s.Queues[1]
	if q.Kind != core.QueueShared || q.Max != 4*q.Count || q.MaxPending != 32 {
		t.Fatalf("shared queue %+v", q)
	}
	d := p.Observe([]core.RecvEvent{{Kind: core.RecvLimit, Queue: 1}}, nil)
	if len(d) != 2 || d[0].Kind != core.RecvGrow || d[0].Value != int64(q.Count/2) || d[1].Kind != core.RecvSetLimit || d[1].Value != int64(q.Low) {
		t.Fatalf("decisions %+v", d)
	}
}
