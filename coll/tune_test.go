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
