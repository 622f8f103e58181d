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
		proto := rapid.SampledFrom([]Protocol{ProtoRead, ProtoWrite, ProtoReadAsync, ProtoPipeline}).Draw(rt, "proto")
		plan := drawTraffic(rt)
		seed := rapid.Int64().Draw(rt, "order")
		w := newWorld(rt, trafficRanks, []inproc.RailOptions{{Slots: 8}, {Slots: 8, MaxRDMA: 64 << 10}}, Options{Protocol: proto})
		defer w.close()
		w.f.Jitter(0, 30*time.Microsecond)
		w.f.Jitter(1, 100*time.Microsecond)
		w.run(rt, func(c *Comm) error {
			reqs, bufs, err := plan.postReceives(c, seed)
			if err != nil {
				return err
			}
			sends, err := plan.sendAll(c)
			if err != nil {
				return err
			}
			last := map[[2]int]int{} // (src, tag) -> last index seen
			for i, r := range reqs {
				st, err := c.Wait(r)
				if err != nil {
					return err
				}
				if err := plan.check(c.Rank(), st, bufs[i][:st.Count], last); err != nil {
					return err
				}
			}
			return c.Waitall(sends, nil)
		})
	})
}

// trafficRanks is the number of ranks of TestRandomSchedulesDeliverInOrder.
const trafficRanks = 3

// traffic is the messages every rank sends every rank: traffic[src][dst],
// in send order.
type traffic [trafficRanks][trafficRanks][]struct{ tag, size int }

// drawTraffic draws up to 12 messages from every rank to every rank, of
// tags 0–2 and sizes across eager and rendezvous.
func drawTraffic(rt *rapid.T) *traffic {
	var plan traffic
	for s := range trafficRanks {
		for d := range trafficRanks {
			k := rapid.IntRange(0, 12).Draw(rt, fmt.Sprintf("count%d%d", s, d))
			for i := 0; i < k; i++ {
				size := rapid.SampledFrom([]int{0, 8, 100, 4096, 4100, 20000, 300 << 10}).Draw(rt, "size")
				plan[s][d] = append(plan[s][d], struct{ tag, size int }{rapid.IntRange(0, 2).Draw(rt, "tag"), size})
			}
		}
	}
	return &plan
}

// postReceives posts c's receives for every message sent to it, in an
// order shuffled by seed: tags 0 and 2 by specific source, tag 1 by
// AnySource.
func (plan *traffic) postReceives(c *Comm, seed int64) ([]*Request, [][]byte, error) {
	me := c.Rank()
	type want struct{ src, tag int }
	var wants []want
	maxSize := 0
	for s := range trafficRanks {
		for _, m := range plan[s][me] {
			src := s
			if m.tag == 1 {
				src = AnySource
			}
			wants = append(wants, want{src, m.tag})
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
			return nil, nil, err
		}
		reqs, bufs = append(reqs, r), append(bufs, b)
	}
	return reqs, bufs, nil
}

// sendAll starts c's sends. A message of 16 bytes or more carries its
// source and index in its first 8 bytes and a pattern of them after.
func (plan *traffic) sendAll(c *Comm) ([]*Request, error) {
	me := c.Rank()
	var sends []*Request
	for d := range trafficRanks {
		for i, m := range plan[me][d] {
			b := make([]byte, m.size)
			if m.size >= 16 {
				binary.LittleEndian.PutUint64(b, uint64(me)<<32|uint64(i))
				pattern(b[8:], me*1000+i)
			}
			s, err := c.Isend(b, d, m.tag)
			if err != nil {
				return nil, err
			}
			sends = append(sends, s)
		}
	}
	return sends, nil
}

// check checks a message rank me received (b, of status st) against the
// message it claims to be: source, tag, size and content, and that no
// later message of its source and tag came before it (last).
func (plan *traffic) check(me int, st Status, b []byte, last map[[2]int]int) error {
	if st.Count < 16 {
		return nil
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
	return nil
}
