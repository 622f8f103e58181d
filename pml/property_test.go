package pml

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gobtl/gobtl/btl/inproc"
)

// TestRandomSchedulesDeliverInOrder: random messages between three ranks,
// random sizes across eager and rendezvous, random protocol, two rails
// that reorder frames, receives posted in random interleavings with
// wildcards. Every message must arrive exactly once, intact, and in send
// order per (source, tag).
func TestRandomSchedulesDeliverInOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const n = 3
		proto := rapid.SampledFrom([]Protocol{ProtoRead, ProtoWrite, ProtoReadAsync, ProtoPipeline}).Draw(rt, "proto")
		type msg struct{ tag, size int }
		var plan [n][n][]msg // plan[src][dst]
		for s := 0; s < n; s++ {
			for d := 0; d < n; d++ {
				k := rapid.IntRange(0, 12).Draw(rt, fmt.Sprintf("count%d%d", s, d))
				for i := 0; i < k; i++ {
					size := rapid.SampledFrom([]int{0, 8, 100, 4096, 4100, 20000, 300 << 10}).Draw(rt, "size")
					plan[s][d] = append(plan[s][d], msg{rapid.IntRange(0, 2).Draw(rt, "tag"), size})
				}
			}
		}
		seed := rapid.Int64().Draw(rt, "order")
		w := newWorld(rt, n, []inproc.RailOptions{{Slots: 8}, {Slots: 8, MaxRDMA: 64 << 10}}, Options{Protocol: proto})
		defer w.close()
		w.f.Jitter(0, 30*time.Microsecond)
		w.f.Jitter(1, 100*time.Microsecond)
		w.run(rt, func(c *Comm) error {
			me := c.Rank()
			// Post receives: tag 0 and 2 by specific source, tag 1 by
			// AnySource, in a shuffled order.
			type want struct{ src, tag, size int }
			var wants []want
			maxSize := 0
			for s := 0; s < n; s++ {
				for _, m := range plan[s][me] {
					src := s
					if m.tag == 1 {
						src = AnySource
					}
					wants = append(wants, want{src, m.tag, m.size})
					maxSize = max(maxSize, m.size)
				}
			}
			rng := newRand(seed + int64(me))
			rng.Shuffle(len(wants), func(i, j int) { wants[i], wants[j] = wants[j], wants[i] })
			var reqs []*Request
			var bufs [][]byte
			for _, wt := range wants {
				b := make([]byte, max(maxSize, 16))
				r, err := c.Irecv(b, wt.src, wt.tag)
				if err != nil {
					return err
				}
				reqs, bufs = append(reqs, r), append(bufs, b)
			}
			var sends []*Request
			for d := 0; d < n; d++ {
				for i, m := range plan[me][d] {
					b := make([]byte, m.size)
					if m.size >= 16 {
						binary.LittleEndian.PutUint64(b, uint64(me)<<32|uint64(i))
						pattern(b[8:], me*1000+i)
					}
					s, err := c.Isend(b, d, m.tag)
					if err != nil {
						return err
					}
					sends = append(sends, s)
				}
			}
			last := map[[2]int]int{} // (src, tag) -> last index seen
			for i, r := range reqs {
				st, err := c.Wait(r)
				if err != nil {
					return err
				}
				b := bufs[i][:st.Count]
				if st.Count < 16 {
					continue
				}
				id := binary.LittleEndian.Uint64(b)
				src, idx := int(id>>32), int(uint32(id))
				if src != st.Source {
					return fmt.Errorf("message claims source %d, status says %d", src, st.Source)
				}
				m := plan[src][me][idx]
				if m.tag != st.Tag || m.size != st.Count {
					return fmt.Errorf("message %d from %d: tag %d size %d, status tag %d count %d", idx, src, m.tag, m.size, st.Tag, st.Count)
				}
				want := pattern(make([]byte, m.size-8), src*1000+idx)
				if string(b[8:]) != string(want) {
					return fmt.Errorf("message %d from %d corrupted", idx, src)
				}
				k := [2]int{src, st.Tag}
				if prev, ok := last[k]; ok && prev >= idx {
					return fmt.Errorf("message %d from %d tag %d overtook message %d", prev, src, st.Tag, idx)
				}
				last[k] = idx
			}
			return c.Waitall(sends, nil)
		})
	})
}
