package coll_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// The steps of recursive halving and doubling in the reductions
// (allreduce, reduce-scatter) are exchanges — both ranks send and each
// waits for the other's message — and say so to the PML
// (pml.Comm.IsendExchange), which moves them by the module's exchange
// table; the ring's steps send one way and keep the plain table, and so
// do the one-round algorithms (the direct allreduce, the linear
// allgather), whose messages a rank that runs can move while their peers
// do not: on shared memory with more ranks than cores that is CMA from
// both ends, which the exchange table would replace by the copy pipeline.
// Recursive doubling allgather's steps are exchanges too but stay plain
// sends: pipelined, 8 ranks on 2 CPUs took 48 ms a call of 256 KiB blocks
// against 16 by CMA (median of 4 alternating pairs; 64 KiB: equal). Here
// the plain table reads by RDMA and the exchange table pipelines, so the
// metrics tell which sends each algorithm marked.
func TestReductionExchangesTakeTheExchangeTable(t *testing.T) {
	const n, size = 4, 64 << 10
	for _, tc := range []struct {
		kind, alg          string
		wantRDMA, wantPipe bool
	}{
		{"allreduce", "rabenseifner", false, true},
		{"allreduce", "recursive_doubling", false, true},
		{"allreduce", "ring", true, false},
		{"allreduce", "direct", true, false},
		{"allgather", "recursive_doubling", true, false},
		{"allgather", "linear", true, false},
		{"reduce_scatter", "recursive_halving", false, true},
		{"reduce_scatter", "ring", true, false},
	} {
		t.Run(tc.kind+"/"+tc.alg, func(t *testing.T) {
			f := inproc.New(n, nil)
			f.Rail("rail0", inproc.RailOptions{EagerLimit: 1024, MaxSendSize: 4096,
				Mech:         core.MechTable{{RDMADepth: 65536}},
				MechExchange: core.MechTable{{RDMADepth: core.NoRDMA}}})
			j := &job{f: f}
			tu := forced(tc.kind, tc.alg, 0)
			for r := range n {
				mods := append([]core.Module{self.New(r, 1024, 4096)}, f.Modules(r)...)
				p, err := pml.New(r, n, mods, pml.Options{Metrics: core.NewMetrics()})
				if err != nil {
					t.Fatal(err)
				}
				j.comms = append(j.comms, coll.New(p, tu))
			}
			defer j.close()
			want := fold(sumInt64, size, 0, n, 3)
			j.run(t, func(c *coll.Comm) error {
				out := make([]byte, size)
				send, want := fill(make([]byte, size), c.Rank(), 3), want
				var err error
				switch tc.kind {
				case "allgather":
					b := size / n
					send, out = send[:b], out[:n*b]
					want = make([]byte, 0, n*b)
					for r := range n {
						want = append(want, fill(make([]byte, b), r, 3)...)
					}
					err = c.Allgather(bg, send, out)
				case "reduce_scatter":
					b := size / n
					out, want = out[:b], want[c.Rank()*b:(c.Rank()+1)*b]
					err = c.ReduceScatterBlock(bg, send, out, sumInt64)
				default:
					err = c.Allreduce(bg, send, out, sumInt64)
				}
				if err != nil {
					return err
				}
				if err := diff(tc.kind, out, want); err != nil {
					return err
				}
				m := pmlOf(c).Metrics()
				rdma, pipe := m.Counter("pml.rndv_sends").Load(), m.Counter("pml.pipeline_sends").Load()
				if (rdma > 0) != tc.wantRDMA || (pipe > 0) != tc.wantPipe {
					t.Errorf("rank %d: %d sends by RDMA, %d by the pipeline; want RDMA %v, pipeline %v",
						c.Rank(), rdma, pipe, tc.wantRDMA, tc.wantPipe)
				}
				return nil
			})
		})
	}
}
