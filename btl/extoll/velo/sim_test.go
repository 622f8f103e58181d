package velo

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/extoll/mailbox"
	"github.com/gobtl/gobtl/btl/extoll/nic"
)

// fabric is a deterministic network of n processes for tests: each has a
// mailbox of exact size; packets wait in per-pair in-flight queues (the
// network, in order) until the test delivers them. A packet that finds
// its mailbox full stays in flight — back-pressure — and is counted as an
// overflow, since with flow control it must never happen. The fabric
// also checks the logical regions: data packets in a mailbox never exceed
// the data region, and credit packets from one peer never exceed the
// credit slots.
type fabric struct {
	n        int
	boxes    []*mailbox.Ring
	inflight [][][]nic.Slot // [src][dst]
	// occupancy per receiver
	data    []int
	credits [][]int // [receiver][from]
	// limits, set once the engines exist
	dataRegion, creditSlots int
	overflows               []string
	delivered               int
}

func newFabric(n, slots int) *fabric {
	f := &fabric{n: n, boxes: make([]*mailbox.Ring, n), inflight: make([][][]nic.Slot, n), data: make([]int, n), credits: make([][]int, n)}
	for i := range n {
		b, err := mailbox.New(slots)
		if err != nil {
			panic(err)
		}
		f.boxes[i] = b
		f.inflight[i] = make([][]nic.Slot, n)
		f.credits[i] = make([]int, n)
	}
	return f
}

// port is one process's view of the fabric: its nic.VELO.
type port struct {
	f    *fabric
	rank int
}

func (p port) Send(dst int, pkts []nic.Slot) (int, error) {
	for _, s := range pkts {
		// Stamp the source as the device would.
		w := nic.WithSource(s.Fields(), p.rank, 0)
		for i := range 8 {
			s[i] = byte(w >> (8 * i))
		}
		p.f.inflight[p.rank][dst] = append(p.f.inflight[p.rank][dst], s)
	}
	return len(pkts), nil
}

func (p port) Poll() *nic.Slot { return p.f.boxes[p.rank].Peek() }

func (p port) Release() {
	s := p.f.boxes[p.rank].Peek()
	if s.Tag() == TagCredit {
		p.f.credits[p.rank][s.Src()]--
	} else {
		p.f.data[p.rank]--
	}
	p.f.boxes[p.rank].Release()
}

// deliver moves up to max in-flight packets from src to dst into dst's
// mailbox and returns how many moved.
func (f *fabric) deliver(src, dst, max int) int {
	q := f.inflight[src][dst]
	moved := 0
	for moved < max && len(q) > 0 {
		s := q[0]
		if !f.boxes[dst].TryPut(&s, src) {
			f.overflow("mailbox of %d full (%d slots) with a packet from %d", dst, f.boxes[dst].Slots(), src)
			break
		}
		if s.Tag() == TagCredit {
			f.credits[dst][src]++
			if f.creditSlots > 0 && f.credits[dst][src] > f.creditSlots {
				f.overflow("credit region of %d: %d credit packets from %d, %d slots", dst, f.credits[dst][src], src, f.creditSlots)
			}
		} else {
			f.data[dst]++
			if f.dataRegion > 0 && f.data[dst] > f.dataRegion {
				f.overflow("data region of %d: %d packets in %d slots", dst, f.data[dst], f.dataRegion)
			}
		}
		q = q[1:]
		moved++
	}
	orig := f.inflight[src][dst]
	f.inflight[src][dst] = orig[:copy(orig, q)]
	f.delivered += moved
	return moved
}

func (f *fabric) deliverAll() int {
	n := 0
	for s := range f.n {
		for d := range f.n {
			n += f.deliver(s, d, 1<<30)
		}
	}
	return n
}

func (f *fabric) inFlight() int {
	n := 0
	for s := range f.n {
		for d := range f.n {
			n += len(f.inflight[s][d])
		}
	}
	return n
}

func (f *fabric) overflow(format string, a ...any) {
	f.overflows = append(f.overflows, fmt.Sprintf(format, a...))
}
