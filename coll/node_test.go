package coll

import (
	"context"
	"testing"
)

type fakeNode struct{}

func (fakeNode) Open(context.Context, *Comm) (NodeModule, error) { return nil, nil }

// The node component takes a collective when the coll block forces "shm"
// and a component is there, or when the table may choose it (the ranks
// own their cores)
// and the collective is one it serves; never for another forced
// algorithm, and never without a component. A collective forced to "shm"
// that the component does not take builds the table's schedule.
func TestTheNodeComponentIsChosenWhenForcedOrAllowed(t *testing.T) {
	forced := func(k Kind, a Alg, node NodeComponent, auto bool) *Tuning {
		tu := &Tuning{Node: node, Machine: Machine{OwnCore: auto}}
		tu.Force[k] = a
		return tu
	}
	for _, c := range []struct {
		what string
		tu   *Tuning
		k    Kind
		want bool
	}{
		{"forced", forced(KindAllreduce, Shm, fakeNode{}, false), KindAllreduce, true},
		{"forced, no component", forced(KindAllreduce, Shm, nil, false), KindAllreduce, false},
		{"another forced", forced(KindAllreduce, Ring, fakeNode{}, true), KindAllreduce, false},
		{"auto, not allowed", forced(KindBarrier, Auto, fakeNode{}, false), KindBarrier, false},
		{"auto, allowed", forced(KindBarrier, Auto, fakeNode{}, true), KindBarrier, true},
		{"auto, bcast", forced(KindBcast, Auto, fakeNode{}, true), KindBcast, true},
		{"auto, reduce", forced(KindReduce, Auto, fakeNode{}, true), KindReduce, true},
		{"auto, allgather", forced(KindAllgather, Auto, fakeNode{}, true), KindAllgather, true},
		{"auto, alltoall", forced(KindAlltoall, Auto, fakeNode{}, true), KindAlltoall, false},
	} {
		if got := c.tu.useNode(c.k, 2, 8); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	// Large messages: through the component from 4 ranks, not on 2.
	auto := forced(KindBcast, Auto, fakeNode{}, true)
	for _, c := range []struct {
		n, bytes int
		want     bool
	}{{2, 255 << 10, true}, {2, 1 << 20, false}, {3, 1 << 20, false}, {4, 1 << 20, true}, {16, 1 << 20, true}} {
		if got := auto.useNode(KindBcast, c.n, c.bytes); got != c.want {
			t.Errorf("a broadcast of %d bytes on %d ranks: %v, want %v", c.bytes, c.n, got, c.want)
		}
	}
	if !auto.useNode(KindBarrier, 2, 0) || !forced(KindAllreduce, Shm, fakeNode{}, false).useNode(KindAllreduce, 2, 1<<20) {
		t.Errorf("a barrier, or an allreduce forced to shm, does not take the component")
	}
	if alg, _ := forced(KindAllreduce, Shm, fakeNode{}, false).decide(KindAllreduce, 4, 8); alg != Linear {
		t.Errorf("an allreduce forced to shm that the component leaves builds %v, want the table's linear", alg)
	}
}
