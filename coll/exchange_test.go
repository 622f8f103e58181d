package coll_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// The steps of recursive halving and doubling are exchanges — both ranks
// send and each waits for the other's message — and say so to the PML
// (pml.Comm.IsendExchange), which moves them by the module's exchange
// table; the ring's steps send one way and keep the plain table. Here the
// plain table reads by RDMA and the exchange table pipelines, so the
// metrics tell which sends each algorithm marked.
func TestAllreduceExchangesTakeTheExchangeTable(t *testing.T) {
	const n, size = 4, 64 << 10
	for _, tc := range []struct {
		alg                string
		wantRDMA, wantPipe bool
	}{
		{"rabenseifner", false, true},
		{"recursive_doubling", false, true},
		{"ring", true, false},
	} {
		t.Run(tc.alg, func(t *testing.T) {
			f := inproc.New(n, nil)
			f.Rail("rail0", inproc.RailOptions{EagerLimit: 1024, MaxSendSize: 4096,
				Mech:         core.MechTable{{RDMADepth: 65536}},
				MechExchange: core.MechTable{{RDMADepth: core.NoRDMA}}})
			j := &job{f: f}
			tu := forced("allreduce", tc.alg, 0)
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
				if err := c.Allreduce(bg, fill(make([]byte, size), c.Rank(), 3), out, sumInt64); err != nil {
					return err
				}
				if err := diff("allreduce", out, want); err != nil {
					return err
				}
				m := c.PML().Metrics()
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
