package recvbuf

import (
	"context"
	"testing"
)

// mgTraffic is what MG sends in cycles V-cycles on n ranks, counted from
// the grid rather than from the run: the messages every rank receives
// (one receive buffer each), and the peers each rank exchanges with.
func mgTraffic(n, cycles int) (messages int64, peers []int) {
	g := grid3(n)
	for me := range n {
		nb := neighbours(me, g)
		with := map[int]bool{}
		for range mgLevels {
			for d := range 6 {
				if nb[d] != me {
					messages++
					with[nb[d]] = true
				}
			}
		}
		for k := 1; k < n; k <<= 1 {
			if p := me ^ k; p < n {
				messages++
				with[p] = true
			}
		}
		peers = append(peers, len(with))
	}
	return messages * int64(cycles), peers
}

// Every message of the workload lands in exactly one receive buffer, and
// each layout registers what seed 002 says per connected peer: per-peer
// 8 × 4 KiB + 8 × 32 KiB (288 KiB), B-SRQ its 4 MiB slab plus 32 tiny
// buffers of 160 B (5 KiB). So at 4 ranks (grid 1×2×2) and 8 (2×2×2)
// the frames are counted, not sampled, and the memory is the formula's.
func TestEveryMessageLandsInOneBufferAndMemoryFollowsThePeers(t *testing.T) {
	for _, n := range []int{4, 8} {
		const cycles = 2
		messages, peers := mgTraffic(n, cycles)
		for _, l := range Layouts {
			r, err := RunRecvbuf(context.Background(), n, cycles, l)
			if err != nil {
				t.Fatal(err)
			}
			var perPeer, fixed float64 = 288 << 10, 0
			if l.Policy == "bsrq" {
				perPeer, fixed = 32*160, 4<<20
			}
			var wantMem float64
			for _, p := range peers {
				wantMem += (fixed + float64(p)*perPeer) / float64(n)
			}
			var queued, sized int64
			for _, q := range r.Queues {
				queued += q.Frames
				if q.Util <= 0 || q.Util > 1 {
					t.Errorf("%d ranks, %s: queue %s utilization %.3f", n, l.Policy, q.Name, q.Util)
				}
			}
			for _, c := range r.Sizes {
				sized += c
			}
			switch {
			case l.Policy == "bsrq" && r.Frames != messages, r.Frames < messages:
				// Per-peer buffers also carry the credit returns.
				t.Errorf("%d ranks, %s: %d frames received, MG sends %d messages", n, l.Policy, r.Frames, messages)
			case queued != r.Frames || sized != r.Frames:
				t.Errorf("%d ranks, %s: %d frames, %d by queue, %d by size", n, l.Policy, r.Frames, queued, sized)
			case r.RecvMem != wantMem:
				t.Errorf("%d ranks, %s: %.0f B registered per process, want %.0f (peers per rank %v)", n, l.Policy, r.RecvMem, wantMem, peers)
			case r.Util <= 0 || r.Util > 1 || r.UtilBelow25 < 0 || r.UtilBelow25 > 1:
				t.Errorf("%d ranks, %s: utilization %.3f, below 25%% %.3f", n, l.Policy, r.Util, r.UtilBelow25)
			}
		}
	}
}
