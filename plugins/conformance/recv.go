package conformance

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
)

// recvInfos: a small job with 12 KiB eager messages, and a wide one with
// 2 KiB (seed 002's scale concern: per-peer buffers do not scale).
var recvInfos = []core.RecvInfo{
	{Peers: 8, EagerLimit: 12 << 10},
	{Peers: 256, EagerLimit: 2 << 10},
}

type recvModel struct{}

func (recvModel) run(h *harness) []Result {
	return runPerInfo(h, kindSpec[core.RecvInfo, core.RecvSetup, core.RecvEvent, core.RecvDecision]{
		infos: recvInfos,
		label: func(i core.RecvInfo) string { return fmt.Sprintf("%dpeers", i.Peers) },
		policy: func(p *plugins.Policy) policyOf[core.RecvInfo, core.RecvSetup, core.RecvEvent, core.RecvDecision] {
			return p.RecvBuffers()
		},
		check: checkRecvSetup,
		describe: func(s core.RecvSetup) string {
			return fmt.Sprintf("%d queues, %d..%d bytes", len(s.Queues), s.Queues[0].BufSize, s.Queues[len(s.Queues)-1].BufSize)
		},
		state: func(_ core.RecvInfo, s core.RecvSetup) streamer[core.RecvEvent, core.RecvDecision] {
			return newRecvState(s)
		},
	})
}

func checkRecvSetup(info core.RecvInfo, s core.RecvSetup) error {
	if len(s.Queues) == 0 {
		return fmt.Errorf("no receive queues")
	}
	for i, q := range s.Queues {
		if q.Kind != core.QueuePerPeer && q.Kind != core.QueueShared {
			return fmt.Errorf("queue %d: unknown kind %d", i, q.Kind)
		}
		if q.BufSize <= 0 {
			return fmt.Errorf("queue %d: buffer size %d", i, q.BufSize)
		}
		if i > 0 && q.BufSize <= s.Queues[i-1].BufSize {
			return fmt.Errorf("queue %d: buffers of %d bytes after %d: queues must be sorted by size, strictly (a sender picks the smallest that fits)", i, q.BufSize, s.Queues[i-1].BufSize)
		}
		if q.Count < 0 || (q.Max != 0 && q.Max < q.Count) || queueMax(q) == 0 {
			return fmt.Errorf("queue %d: count %d, max %d: no buffer could ever be posted, or max below count", i, q.Count, q.Max)
		}
		if q.Low < 0 || q.Low > queueMax(q) {
			return fmt.Errorf("queue %d: low watermark %d not in [0, %d]", i, q.Low, queueMax(q))
		}
	}
	if last := s.Queues[len(s.Queues)-1].BufSize; last < info.EagerLimit {
		return fmt.Errorf("the largest buffer (%d bytes) cannot hold an eager message of %d bytes", last, info.EagerLimit)
	}
	if s.SendFreeListMax < 0 {
		return fmt.Errorf("SendFreeListMax %d is negative", s.SendFreeListMax)
	}
	return nil
}

func queueMax(q core.QueueSpec) int { return max(q.Count, q.Max) }

// recvState models the receive queues: buffers posted on each.
type recvState struct {
	setup  core.RecvSetup
	posted []int
	now    time.Duration
}

func newRecvState(s core.RecvSetup) *recvState {
	st := &recvState{setup: s, posted: make([]int, len(s.Queues))}
	for i, q := range s.Queues {
		st.posted[i] = q.Count
	}
	return st
}

func (st *recvState) events(rng *rand.Rand, n int) []core.RecvEvent {
	es := make([]core.RecvEvent, n)
	for i := range es {
		st.now += time.Duration(rng.IntN(100_000))
		q := rng.IntN(max(1, len(st.posted)))
		e := core.RecvEvent{Kind: core.RecvExhausted, Queue: int32(q), At: st.now}
		if len(st.posted) > 0 {
			e.Posted = int32(st.posted[q])
			if st.setup.Queues[q].Kind == core.QueueShared && rng.IntN(2) == 0 {
				e.Kind, e.Value = core.RecvLimit, int64(st.posted[q])
			} else {
				e.Value = int64(1 + rng.IntN(16))
			}
		}
		es[i] = e
	}
	return es
}

func (st *recvState) apply(ds []core.RecvDecision, v *violations) {
	for _, d := range ds {
		if d.Queue < 0 || int(d.Queue) >= len(st.posted) {
			v.add("decision for queue %d of %d", d.Queue, len(st.posted))
			continue
		}
		q := st.setup.Queues[d.Queue]
		switch d.Kind {
		case core.RecvGrow:
			if d.Value < 1 || d.Value > int64(queueMax(q)) {
				v.add("grow queue %d by %d: not in [1, %d]", d.Queue, d.Value, queueMax(q))
				continue
			}
			st.posted[d.Queue] = min(st.posted[d.Queue]+int(d.Value), queueMax(q))
		case core.RecvSetLimit:
			if d.Value < 0 || d.Value > int64(queueMax(q)) {
				v.add("limit of queue %d set to %d: not in [0, %d]", d.Queue, d.Value, queueMax(q))
			}
		default:
			v.add("unknown recvbuf decision kind %d", d.Kind)
		}
	}
}
