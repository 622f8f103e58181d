package shm

import (
	"context"
	"errors"
	"fmt"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// module serves one communicator: its node's part through the segment
// (nil for a rank alone on its node), and, for a communicator that spans
// nodes, the network part between the nodes' leaders — the lowest rank
// of each node — by coll's point-to-point algorithms on a communicator
// of the leaders (HAN's two levels).
type module struct {
	node    *node
	sub     *coll.Comm // the node's ranks: its PML carries the node's own messages
	leaders *coll.Comm // the leaders, on a leader of a communicator that spans nodes

	// px is the communicator's PML: the leaders' part is waited for on
	// it, so that a member lost anywhere in it — not only a leader —
	// ends the wait.
	px         coll.PML
	reqs       [1]*pml.Request
	sts        [1]pml.Status
	rank, size int
	nodes      int
	nodeOf     []int // the node of each rank of the communicator
	local      []int // each rank's rank on its node
	// contiguous: every node holds a contiguous range of ranks, so that
	// combining each node's part, then the nodes' in order, keeps rank
	// order; equal: every node holds as many.
	contiguous, equal bool

	scratch []byte // a leader's partial result
}

// A noop combines nothing: the reduce of a hierarchical barrier's fan-in.
var noop = coll.Op{Size: 1, Commutative: true, Fn: coll.Func(func(_, _ []byte) {})}

// tagHandoff carries a reduce's result from the root node's leader to
// the root over the node's communicator, whose context only this module
// uses.
const tagHandoff = 7

func (m *module) leader() bool { return m.local[m.rank] == 0 }

// myNode is this rank's node.
func (m *module) myNode() int { return m.nodeOf[m.rank] }

// A collective over several nodes runs in stages — the node's, the
// leaders', the node's — that the other ranks wait for: one that
// returned half-way because its context ended would leave them waiting.
// So it runs to its end (or fails) whatever its context; only a
// collective of one node returns at the context's end, leaving the rest
// to the PML (node.run).
var whole = context.Background()

// netStage names the leaders' part in the PML's state reports.
type netStage struct{}

func (netStage) String() string { return "coll/shm: the leaders' part" }

// net waits for the leaders' part, started as r (or failed to start
// with err). A failure fails the node's ranks too, which wait on their
// leader.
func (m *module) net(r *pml.Request, err error) error {
	if err == nil {
		m.reqs[0] = r
		err = m.px.WaitRound(whole, m.reqs[:], m.sts[:], netStage{})
		if m.reqs[0] != nil { // a member lost: r never ends well
			_ = m.px.Free(r)
			m.reqs[0] = nil
		}
	}
	if err != nil {
		err = fmt.Errorf("coll/shm: the leaders' part: %w", err)
		if m.node != nil {
			return m.node.fail(err)
		}
	}
	return err
}

// Barrier: the node's fan-in to its leader, a barrier of the leaders,
// the node's fan-out.
func (m *module) Barrier(ctx context.Context) error {
	if m.nodes == 1 {
		return m.node.call(ctx, kBarrier, nil, nil, coll.Op{}, 0)
	}
	if m.node != nil {
		if err := m.node.call(whole, kReduce, nil, nil, noop, 0); err != nil {
			return err
		}
	}
	if m.leaders != nil {
		if err := m.net(m.leaders.Ibarrier()); err != nil {
			return err
		}
	}
	if m.node != nil {
		return m.node.call(whole, kBcast, nil, nil, coll.Op{}, 0)
	}
	return nil
}

// Bcast: on the root's node from the root, between the leaders from the
// root's node's, then on every other node from its leader.
func (m *module) Bcast(ctx context.Context, buf []byte, root int) error {
	if m.nodes == 1 {
		return m.node.call(ctx, kBcast, nil, buf, coll.Op{}, m.local[root])
	}
	rn := m.nodeOf[root]
	if rn == m.myNode() && m.node != nil {
		if err := m.node.call(whole, kBcast, nil, buf, coll.Op{}, m.local[root]); err != nil {
			return err
		}
	}
	if m.leaders != nil {
		if err := m.net(m.leaders.Ibcast(buf, rn)); err != nil {
			return err
		}
	}
	if rn != m.myNode() && m.node != nil {
		return m.node.call(whole, kBcast, nil, buf, coll.Op{}, 0)
	}
	return nil
}

// ordered says whether op may be combined node by node: it commutes, or
// the nodes hold contiguous ranges of ranks.
func (m *module) ordered(op coll.Op) bool { return op.Commutative || m.contiguous }

// fits says whether op's elements fit the segment's chunks.
func (m *module) fits(op coll.Op) bool {
	return m.node == nil || op.Size <= m.node.seg.lay.chunk
}

// Allreduce: a reduce to the node's leader, an allreduce of the leaders,
// a broadcast from the node's leader.
func (m *module) Allreduce(ctx context.Context, send, recv []byte, op coll.Op) error {
	if !m.ordered(op) || !m.fits(op) {
		return coll.ErrUnserved
	}
	if m.nodes == 1 {
		return m.node.call(ctx, kAllreduce, send, recv, op, 0)
	}
	if m.node != nil {
		var part []byte
		if m.leader() {
			part = recv
		}
		if err := m.node.call(whole, kReduce, send, part, op, 0); err != nil {
			return err
		}
	} else {
		copy(recv, send)
	}
	if m.leaders != nil {
		if err := m.net(m.leaders.Iallreduce(recv, recv, op)); err != nil {
			return err
		}
	}
	if m.node != nil {
		return m.node.call(whole, kBcast, nil, recv, coll.Op{}, 0)
	}
	return nil
}

// Reduce: a reduce to each node's leader, a reduce of the leaders to the
// root's node's, which hands the result to the root (whatever happened:
// a failure is handed on as an empty message, so that the root never
// waits for a leader that gave up).
func (m *module) Reduce(ctx context.Context, send, recv []byte, op coll.Op, root int) error {
	if !m.ordered(op) || !m.fits(op) {
		return coll.ErrUnserved
	}
	if m.nodes == 1 {
		return m.node.call(ctx, kReduce, send, recv, op, m.local[root])
	}
	var part []byte
	if m.leader() {
		part = m.part(len(send))
	}
	var err error
	if m.node != nil {
		err = m.node.call(whole, kReduce, send, part, op, 0)
	} else {
		copy(part, send)
	}
	rn := m.nodeOf[root]
	hand := rn == m.myNode() && m.local[root] != 0
	switch {
	case m.leaders != nil:
		var result []byte
		if rn == m.myNode() {
			result = recv
			if hand {
				result = m.part2(len(send))
			}
		}
		if err == nil {
			err = m.net(m.leaders.Ireduce(part, result, op, rn))
		}
		if hand {
			if err != nil {
				result = nil
			}
			err = errors.Join(err, m.handoff(result, m.local[root]))
		}
	case root == m.rank:
		err = errors.Join(err, m.received(recv))
	}
	return err
}

// handoff sends the reduce's result (nil: its failure) from the leader
// to the root of its node.
func (m *module) handoff(b []byte, to int) error {
	r, err := m.sub.PML().Isend(b, to, tagHandoff)
	if err == nil {
		m.reqs[0] = r
		err = m.px.WaitRound(whole, m.reqs[:], m.sts[:], netStage{})
		if m.reqs[0] != nil {
			_ = m.px.Free(r)
			m.reqs[0] = nil
		}
	}
	if err != nil {
		return fmt.Errorf("coll/shm: reduce: %w", err)
	}
	return nil
}

// received takes the root's result from its node's leader, waiting on the
// whole communicator: a member lost ends it.
func (m *module) received(recv []byte) error {
	r, err := m.sub.PML().Irecv(recv, 0, tagHandoff)
	if err == nil {
		m.reqs[0] = r
		err = m.px.WaitRound(whole, m.reqs[:], m.sts[:], netStage{})
		if m.reqs[0] != nil {
			_ = m.px.Cancel(r)
			_ = m.px.Free(r)
			m.reqs[0] = nil
		} else if err == nil && m.sts[0].Count != len(recv) {
			err = fmt.Errorf("coll/shm: reduce: it failed on this node's leader: %w", core.ErrPeerLost)
		}
	}
	if err != nil {
		return fmt.Errorf("coll/shm: reduce: %w", err)
	}
	return nil
}

// part and part2 are a leader's scratch: its node's partial result and
// the result on its way to the root.
func (m *module) part(n int) []byte {
	if cap(m.scratch) < 2*n {
		m.scratch = make([]byte, 2*n)
	}
	return m.scratch[:n]
}

func (m *module) part2(n int) []byte { return m.scratch[n : 2*n] }

// Allgather: an allgather on each node into its nodes' range of recv, an
// allgather of the nodes' ranges between the leaders, a broadcast of
// the whole from each node's leader. It serves nodes of contiguous,
// equal ranges only.
func (m *module) Allgather(ctx context.Context, send, recv []byte) error {
	b := len(send)
	if b == 0 {
		return nil
	}
	if m.nodes == 1 {
		return m.node.call(ctx, kAllgatherChunks, send, recv, coll.Op{}, 0)
	}
	if !m.contiguous || !m.equal {
		return coll.ErrUnserved
	}
	per := m.size / m.nodes * b
	mine := recv[m.myNode()*per : (m.myNode()+1)*per]
	if m.node != nil {
		if err := m.node.call(whole, kAllgatherChunks, send, mine, coll.Op{}, 0); err != nil {
			return err
		}
	} else {
		copy(mine, send)
	}
	if m.leaders != nil {
		if err := m.net(m.leaders.Iallgather(mine, recv)); err != nil {
			return err
		}
	}
	if m.node != nil {
		return m.node.call(whole, kBcast, nil, recv, coll.Op{}, 0)
	}
	return nil
}
