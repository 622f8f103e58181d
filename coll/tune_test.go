package coll

import "testing"

// The decision picks what Open MPI 4.1's coll/tuned picks on the job
// sizes and messages the targets speak of
// (coll_tuned_decision_fixed.c: Rabenseifner allreduce from 8 KiB on 4 to
// 16 ranks; recursive doubling allgather on powers of two below 32 ranks;
// a linear broadcast of large messages from 8 to 15 ranks, taken here
// from 4 to 31), and keeps the ring where recursive doubling would need
// Bruck's extra rotation of large blocks. Where it departs from Open MPI
// it takes one round for fewer rounds' waits: a barrier, and an allreduce
// below 2 KiB, up to 16 ranks are every rank to every rank (Open MPI:
// recursive doubling, and a linear barrier of two rounds).
func TestTheDecisionFollowsOpenMPIWhereTheTargetsAre(t *testing.T) {
	for _, c := range []struct {
		k        Kind
		n, bytes int
		want     Alg
	}{
		{KindAllreduce, 4, 8, Linear},
		{KindAllreduce, 3, 8, Linear},
		{KindAllreduce, 16, 8, Linear},
		{KindAllreduce, 16, 1 << 10, Linear},
		{KindAllreduce, 17, 8, RecursiveDoubling},
		{KindAllreduce, 4, 2 << 10, RecursiveDoubling},
		{KindAllreduce, 4, 1 << 20, Rabenseifner},
		{KindAllreduce, 8, 1 << 20, Rabenseifner},
		{KindAllreduce, 16, 1 << 20, Rabenseifner},
		{KindBarrier, 4, 0, Linear},
		{KindBarrier, 16, 0, Linear},
		{KindBarrier, 17, 0, Dissemination},
		{KindBcast, 4, 8, Binomial},
		{KindBcast, 4, 1 << 20, Linear},
		{KindBcast, 8, 1 << 20, Linear},
		{KindBcast, 16, 1 << 20, Linear},
		{KindAllgather, 4, 32 << 10, RecursiveDoubling},
		{KindAllgather, 4, 64 << 10, Linear},
		{KindAllgather, 4, 1 << 20, Linear},
		{KindAllgather, 8, 1 << 20, RecursiveDoubling},
		{KindAllgather, 16, 1 << 20, RecursiveDoubling},
		{KindAllgather, 6, 1 << 20, Ring},
		{KindAllgather, 3, 1 << 20, Ring},
		{KindAllgather, 32, 1 << 20, Ring},
		{KindAllgather, 6, 8, RecursiveDoubling}, // Bruck, as Allgather turns it
	} {
		if got, _ := (&Tuning{}).decide(c.k, c.n, c.bytes); got != c.want {
			t.Errorf("%v of %d bytes on %d ranks: %v, want %v", c.k, c.bytes, c.n, got, c.want)
		}
	}
}

// The sizes of issue 29's tables, and a few around the switch points:
// what ranks that own a core get, against what ranks that share cores get
// (the first table, kept). Either column wrong fails.
func TestRanksThatOwnACoreGetOpenMPIsRulesAndRanksThatShareKeepTheirs(t *testing.T) {
	own := Machine{OwnCore: true, Nodes: 1}
	for _, c := range []struct {
		k            Kind
		n, bytes     int
		shared, owns Alg
	}{
		{KindAllreduce, 4, 8, Linear, RecursiveDoubling},
		{KindAllreduce, 16, 8, Linear, RecursiveDoubling},
		{KindAllreduce, 16, 1 << 10, Linear, RecursiveDoubling},
		{KindAllreduce, 8, 4 << 10, RecursiveDoubling, RecursiveDoubling},
		{KindAllreduce, 16, 4 << 10, RecursiveDoubling, Rabenseifner},
		{KindAllreduce, 4, 1 << 20, Rabenseifner, Rabenseifner},
		{KindAllreduce, 16, 1 << 20, Rabenseifner, Rabenseifner},
		{KindAllreduce, 2, 8, Linear, RecursiveDoubling},
		{KindBarrier, 2, 0, Linear, Dissemination},
		{KindBarrier, 4, 0, Linear, Dissemination},
		{KindBarrier, 16, 0, Linear, Dissemination},
		{KindBcast, 4, 8, Binomial, Binomial},
		{KindBcast, 4, 1 << 20, Linear, Linear},
		{KindBcast, 8, 64 << 10, Linear, Linear},
		{KindBcast, 16, 64 << 10, Linear, Binomial},
		{KindBcast, 16, 1 << 20, Linear, ScatterAllgather},
		{KindBcast, 32, 1 << 20, ScatterAllgather, ScatterAllgather},
		{KindAllgather, 4, 1 << 20, Linear, Linear},
		{KindAllgather, 16, 1 << 20, RecursiveDoubling, RecursiveDoubling},
		{KindAllgather, 6, 1 << 20, Ring, Ring},
		{KindReduce, 16, 1 << 20, Binary, Binary},
	} {
		for _, m := range []struct {
			m    Machine
			want Alg
		}{{Machine{}, c.shared}, {Machine{Nodes: 4, PerNode: 32}, c.shared}, {own, c.owns}} {
			if got, _ := (&Tuning{Machine: m.m}).decide(c.k, c.n, c.bytes); got != m.want {
				t.Errorf("%v of %d bytes on %d ranks, %+v: %v, want %v", c.k, c.bytes, c.n, m.m, got, m.want)
			}
		}
	}
}

// The linear allgather reads large blocks by CMA from both ends: on one
// node only. Across nodes ranks that own a core take recursive doubling.
func TestTheLinearAllgatherIsForOneNode(t *testing.T) {
	for nodes, want := range map[int]Alg{0: Linear, 1: Linear, 2: RecursiveDoubling} {
		tu := &Tuning{Machine: Machine{OwnCore: true, Nodes: nodes, PerNode: 2}}
		if got, _ := tu.decide(KindAllgather, 4, 1<<20); got != want {
			t.Errorf("%d nodes: %v, want %v", nodes, got, want)
		}
	}
}

// A forced algorithm stands whatever the machine.
func TestAForcedAlgorithmBeatsTheMachine(t *testing.T) {
	tu := &Tuning{Machine: Machine{OwnCore: true}}
	if err := tu.Set("allreduce", "linear"); err != nil {
		t.Fatal(err)
	}
	if got, _ := tu.decide(KindAllreduce, 16, 8); got != Linear {
		t.Fatalf("forced linear on owned cores: %v", got)
	}
}
