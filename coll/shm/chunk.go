package shm

import (
	"fmt"
	"sync/atomic"

	"github.com/gobtl/gobtl/coll"
)

// Large collectives go through the segment in chunks, pipelined: each
// rank has depth chunks of its own and the node depth result chunks, and
// a collective is a run of chunk steps numbered across all collectives
// (node.step), step t using chunk t mod depth. Each rank counts, in lines
// of its own, the steps whose data it has copied in (fill), whose share
// it has reduced (red) and whose data it has finished reading (take). A
// rank writes into chunk t mod depth — its own or its share of the
// result — only once every rank has taken step t−depth; a rank reads a
// rank's chunk once that rank's fill reaches t+1. So up to depth steps
// are in flight, every rank copying at once: the root's copy of chunk
// t+1 into the segment runs beside the others' copies of chunk t out of
// it.
//
// Broadcast: the root copies each chunk in, the others copy it out.
// Allreduce: every rank copies its chunk in; rank r reduces share r of
// it — a cache-line-aligned n-th — across the n ranks' chunks, in rank
// order, into the result chunk (the serial fold x0∘x1∘…∘xn−1, whatever
// the operation); every rank copies the result out. Reduce: the same,
// only the root copying out. Allgather: every rank copies its block's
// chunk in and the others' out.
//
// Why copy in and out rather than read the root's buffer across
// processes (CMA, process_vm_readv, as btl/sm's rendezvous does): on the
// 16-core node of issue 29 one core copies 26.9 GB/s and
// process_vm_readv moves 12, so two memcpys pipelined, the second on the
// readers' cores, beat one CMA read (78 µs against 87 for 1 MiB), and
// the readers copy at once from one chunk in the shared cache; an
// allreduce reads every rank's vector, which CMA would do with n system
// calls per chunk; and it needs no ptrace permission (Yama) and no
// system call, and works the same for ranks that are goroutines of one
// process.

// A chunk collective publishes its sequence number and length in its
// done line's second word (seq<<32 | len, both truncated to 32 bits)
// before its first fill, so that a rank that passed another length
// fails with ErrMismatch rather than reading the wrong bytes. A rank
// that has moved on to its next collective no longer answers for this
// one: the check is then whether it took a slot in this one (slotted) —
// a rank that left a small collective for the chunks of the next one
// (straddle.go).
const cLen = cDone + 8

func callWord(seq uint64, n int) uint64 { return seq<<32 | uint64(uint32(n)) }

// checkLen compares rank x's length with this rank's, n.
func (o *op) checkLen(x, n int) error {
	w := atomic.LoadUint64(o.m.seg.u64(o.m.seg.rank(x) + cLen))
	if w>>32 != o.seq&0xffffffff {
		_, err := o.slotted(x)
		return err
	}
	if uint32(w) != uint32(n) {
		return fmt.Errorf("coll/shm: %s: rank %d passed %d bytes, this one %d: %w", o, x, uint32(w), n, coll.ErrMismatch)
	}
	return o.otherRoot(x)
}

// store sets this rank's counter c to v.
func (o *op) store(c int, v uint64) { atomic.StoreUint64(o.m.seg.counter(o.m.me, c), v) }

// takenBy reports whether every rank has taken the steps before v.
func (m *node) takenBy(v uint64) bool {
	if m.taken >= v {
		return true
	}
	least := ^uint64(0)
	for x := range m.n {
		least = min(least, atomic.LoadUint64(m.seg.counter(x, cTake)))
	}
	m.taken = least
	return least >= v
}

// all waits, from rank o.i on, for every rank's counter c to reach v;
// on the call's first step it checks each rank's length (n).
func (o *op) all(c int, v uint64, n int) (bool, error) {
	s := o.m.seg
	for ; o.i < o.m.n; o.i++ {
		if atomic.LoadUint64(s.counter(o.i, c)) < v {
			return o.slotted(o.i)
		}
		if o.j == 0 && c == cFill {
			if err := o.checkLen(o.i, n); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}

// reusable reports whether this rank may write step t: every rank has
// taken step t−depth, whose chunk it reuses, and, before the call's
// first fill, the first step of this rank's last chunk collective
// (op.gate, roots.go). It does not look for ranks in the slots
// (straddle.go): a reduction's step is reused only once every rank
// filled the first one, and a broadcast's root that waits here for
// ranks in the slots waits for ranks that see its first fill (chunked)
// and break the segment.
func (o *op) reusable(t uint64) bool {
	d := uint64(o.m.seg.lay.depth)
	return (t < d || o.m.takenBy(t+1-d)) && (o.j > 0 || o.m.takenBy(o.gate))
}

// begin0 publishes the call's root and length before its first step.
func (o *op) begin0(n int) {
	if o.j == 0 {
		o.announce()
		atomic.StoreUint64(o.m.seg.u64(o.m.seg.rank(o.m.me)+cLen), callWord(o.seq, n))
	}
}

// bcastChunks is the large broadcast.
func (o *op) bcastChunks() (bool, error) {
	m, s := o.m, o.m.seg
	c, buf := s.lay.chunk, o.recv
	for ; o.j < o.steps; o.j++ {
		t := o.t0 + uint64(o.j)
		k := int(t % uint64(s.lay.depth))
		b := buf[o.j*c : min(len(buf), (o.j+1)*c)]
		if m.me == o.root {
			if !o.reusable(t) {
				return false, nil
			}
			o.begin0(len(buf))
			copy(s.area(m.me, k), b)
			o.store(cFill, t+1)
		} else {
			if atomic.LoadUint64(s.counter(o.root, cFill)) < t+1 {
				return o.unfilled(o.root)
			}
			if o.j == 0 {
				if err := o.checkLen(o.root, len(buf)); err != nil {
					return true, err
				}
			}
			copy(b, s.area(o.root, k))
		}
		o.store(cTake, t+1)
	}
	return true, nil
}

// share is the part of a step's chunk of e elements of size z that rank
// r reduces, in bytes: whole cache lines of whole elements, dealt out
// evenly.
func share(r, n, e, z int) (lo, hi int) {
	u := line / gcd(z, line) // elements per line-aligned unit
	units := (e + u - 1) / u
	a, b := r*units/n*u, (r+1)*units/n*u
	return min(a, e) * z, min(b, e) * z
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// reduceChunks is the large allreduce, and reduce (kReduceChunks): per
// step, copy in (phase 0), reduce this rank's share (1), copy out (2).
func (o *op) reduceChunks() (bool, error) {
	m, s := o.m, o.m.seg
	z := o.fn.Size
	per := s.lay.chunk / z * z // bytes of whole elements per step
	n := len(o.send)
	for ; o.j < o.steps; o.j, o.ph = o.j+1, 0 {
		t := o.t0 + uint64(o.j)
		k := int(t % uint64(s.lay.depth))
		lo, hi := o.j*per, min(n, (o.j+1)*per)
		switch o.ph {
		case 0:
			if !o.reusable(t) {
				return false, nil
			}
			o.begin0(n)
			copy(s.area(m.me, k), o.send[lo:hi])
			o.store(cFill, t+1)
			o.ph, o.i = 1, 0
			fallthrough
		case 1:
			if done, err := o.all(cFill, t+1, n); !done || err != nil {
				return done, err
			}
			a, b := share(m.me, m.n, (hi-lo)/z, z)
			if a < b {
				r := s.result(k)[a:b]
				copy(r, s.area(0, k)[a:b])
				for x := 1; x < m.n; x++ {
					o.fn.Fn.Combine(r, s.area(x, k)[a:b])
				}
			}
			o.store(cRed, t+1)
			o.ph, o.i = 2, 0
			if o.kind == kReduceChunks && m.me != o.root {
				o.store(cTake, t+1)
				continue
			}
			fallthrough
		default:
			if done, err := o.all(cRed, t+1, n); !done || err != nil {
				return done, err
			}
			copy(o.recv[lo:hi], s.result(k))
			o.store(cTake, t+1)
		}
	}
	return true, nil
}

// allgatherChunks is the allgather: per step, every rank copies its
// block's chunk in (phase 0) and the others' out (1), starting from the
// next rank so that the ranks do not all read the same chunk first.
func (o *op) allgatherChunks() (bool, error) {
	m, s := o.m, o.m.seg
	c, b := s.lay.chunk, len(o.send)
	for ; o.j < o.steps; o.j, o.ph = o.j+1, 0 {
		t := o.t0 + uint64(o.j)
		k := int(t % uint64(s.lay.depth))
		lo, hi := o.j*c, min(b, (o.j+1)*c)
		if o.ph == 0 {
			if !o.reusable(t) {
				return false, nil
			}
			o.begin0(b)
			copy(s.area(m.me, k), o.send[lo:hi])
			copy(o.recv[m.me*b+lo:m.me*b+hi], o.send[lo:hi])
			o.store(cFill, t+1)
			o.ph, o.i = 1, 1
		}
		for ; o.i < m.n; o.i++ {
			x := (m.me + o.i) % m.n
			if atomic.LoadUint64(s.counter(x, cFill)) < t+1 {
				return o.slotted(x)
			}
			if o.j == 0 {
				if err := o.checkLen(x, b); err != nil {
					return true, err
				}
			}
			copy(o.recv[x*b+lo:x*b+hi], s.area(x, k))
		}
		o.store(cTake, t+1)
	}
	return true, nil
}
