package recvbuf

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/gobtl/gobtl/experiment"
)

func TestGridNeighboursAreSymmetric(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8, 12, 16} {
		g := grid3(n)
		if g[0]*g[1]*g[2] != n {
			t.Fatalf("grid %v for %d ranks", g, n)
		}
		for r := 0; r < n; r++ {
			nb := neighbours(r, g)
			for d := 0; d < 6; d++ {
				if back := neighbours(nb[d], g)[d^1]; back != r {
					t.Fatalf("%d ranks: rank %d's neighbour %d in direction %d has %d the other way", n, r, nb[d], d, back)
				}
			}
		}
	}
}

func TestBSRQUsesReceiveBuffersBetterThanPerPeerBuffers(t *testing.T) {
	var rs []RecvbufResult
	for _, l := range Layouts {
		r, err := RunRecvbuf(context.Background(), 4, 2, l)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	PrintRecvbuf(os.Stdout, rs)
	if rs[0].Frames == 0 || rs[1].Frames == 0 {
		t.Fatal("no frames counted")
	}
	// Every halo size lands in a buffer at most twice its size under B-SRQ,
	// and mostly in one 4-64 times its size per peer.
	if rs[1].Util <= rs[0].Util {
		t.Fatalf("B-SRQ utilization %.2f is not above per-peer's %.2f", rs[1].Util, rs[0].Util)
	}
}

// TestSimAndSoftrcRegisterAlike runs the memory job at 8 and 16 ranks on
// softrc and on the simulated provider: rank 0's ib module must register
// the same receive bytes under every layout, which is what lets the
// memory table measure the large jobs on the simulator.
func TestSimAndSoftrcRegisterAlike(t *testing.T) {
	env := &experiment.Env{Ctx: context.Background(), Out: io.Discard}
	for _, n := range []int{8, 16} {
		for _, l := range MemoryLayouts {
			soft, err := MeasureRecvMemory(env, l, n)
			if err != nil {
				t.Fatalf("%s, %d ranks, softrc: %v", l.Name, n, err)
			}
			simd, err := MeasureRecvMemorySim(context.Background(), l, n)
			if err != nil {
				t.Fatalf("%s, %d ranks, sim: %v", l.Name, n, err)
			}
			t.Logf("%s, %d ranks: softrc %d B, sim %d B", l.Name, n, soft, simd)
			if soft <= 0 || soft != simd {
				t.Errorf("%s, %d ranks: softrc registered %d receive bytes, sim %d", l.Name, n, soft, simd)
			}
		}
	}
}
