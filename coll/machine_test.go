package coll_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/coll"
)

// The algorithm a collective ran, by its counter (coll.<kind>.<alg>), on
// 16 ranks that own a core and on 16 that share cores, at the sizes of
// issue 29: the machine reaches the decision through Tuning.Machine, and
// every rank runs the algorithm the decision names.
func TestTheAlgorithmThatRunsFollowsTheMachine(t *testing.T) {
	const n = 16
	for _, c := range []struct {
		m    coll.Machine
		want []string
	}{
		{coll.Machine{}, []string{"allreduce.linear", "allreduce.rabenseifner", "barrier.linear", "bcast.linear", "allgather.recursive_doubling"}},
		{coll.Machine{OwnCore: true, Nodes: 1, PerNode: n}, []string{"allreduce.recursive_doubling", "allreduce.rabenseifner", "barrier.dissemination", "bcast.scatter_allgather", "allgather.recursive_doubling"}},
	} {
		t.Run(fmt.Sprintf("OwnCore=%v", c.m.OwnCore), func(t *testing.T) {
			j := newJob(t, n, &coll.Tuning{Machine: c.m})
			defer j.close()
			sum := coll.Sum[float32]()
			j.run(t, func(x *coll.Comm) error {
				ctx := context.Background()
				small, big := make([]float32, 2), make([]float32, 1<<18) // 8 B, 1 MiB
				if err := x.Allreduce(ctx, coll.Bytes(small), coll.Bytes(small), sum); err != nil {
					return err
				}
				if err := x.Allreduce(ctx, coll.Bytes(big), coll.Bytes(big), sum); err != nil {
					return err
				}
				if err := x.Barrier(ctx); err != nil {
					return err
				}
				if err := x.Bcast(ctx, coll.Bytes(big), 0); err != nil {
					return err
				}
				return x.Allgather(ctx, coll.Bytes(big[:1<<14]), coll.Bytes(big))
			})
			for r, x := range j.comms {
				for _, name := range c.want {
					if got := x.PML().Metrics().Counter("coll." + name).Load(); got != 1 {
						t.Errorf("rank %d: coll.%s = %d, want 1", r, name, got)
					}
				}
			}
		})
	}
}
