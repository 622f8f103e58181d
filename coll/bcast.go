package coll

import (
	"context"
	"math/bits"

	"github.com/gobtl/gobtl/pml"
)

// Barrier returns when every rank of c has entered it.
func (c *Comm) Barrier(ctx context.Context) error {
	if done, err := c.nodeBarrier(ctx); done {
		return err
	}
	return c.block(ctx, c.barrier())
}

// Ibarrier starts a barrier; its request completes once every rank has
// entered it.
func (c *Comm) Ibarrier() (*pml.Request, error) { return c.nonblocking(c.barrier()) }

func (c *Comm) barrier() *schedule {
	n, me := c.Size(), c.Rank()
	alg, _ := c.t.decide(KindBarrier, n, 0)
	if s := c.again(KindBarrier, alg, nil, nil); s != nil {
		return s
	}
	s := c.begin(KindBarrier, alg, call{root: -1})
	s.keep(nil, nil) // a barrier's steps move no bytes
	if alg == Linear {
		// Every rank tells every other one, and waits once: one round
		// instead of ⌈log2 n⌉ (see allreduceLinear).
		for i := 1; i < n; i++ {
			s.recv((me-i+n)%n, nil)
		}
		for i := 1; i < n; i++ {
			s.send((me+i)%n, nil)
		}
		s.wait()
		return s
	}
	// Dissemination: after round k a rank has heard, directly or not, from
	// the 2^(k+1)−1 ranks before it. The rounds' peers all differ, so
	// every receive is posted at once, before the first send (see
	// allreduceRecursiveDoubling).
	var hs [bits.UintSize]int
	i := 0
	for k := 1; k < n; k <<= 1 {
		hs[i] = s.prepost((me-k+n)%n, nil)
		i++
	}
	i = 0
	for k := 1; k < n; k <<= 1 {
		s.send((me+k)%n, nil)
		s.await(hs[i])
		i++
		s.wait()
	}
	return s
}

// Bcast copies root's buf into every rank's buf; every rank passes a buf
// of the same length.
func (c *Comm) Bcast(ctx context.Context, buf []byte, root int) error {
	if done, err := c.nodeBcast(ctx, buf, root); done {
		return err
	}
	s, err := c.bcast(buf, root)
	if err != nil {
		return err
	}
	return c.block(ctx, s)
}

// Ibcast starts a broadcast; buf must not be touched until its request
// completes.
func (c *Comm) Ibcast(buf []byte, root int) (*pml.Request, error) {
	s, err := c.bcast(buf, root)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(s)
}

func (c *Comm) bcast(buf []byte, root int) (*schedule, error) {
	if err := c.checkRoot("bcast", root); err != nil {
		return nil, err
	}
	n, me := c.Size(), c.Rank()
	alg, seg := c.t.decide(KindBcast, n, len(buf))
	s := c.begin(KindBcast, alg, call{root: root, bytes: len(buf)})
	if n == 1 || len(buf) == 0 {
		return s, nil
	}
	switch alg {
	case Binary:
		bcastTree(s, n, me, root, buf, seg, 2)
	case Pipeline:
		bcastTree(s, n, me, root, buf, seg, 1)
	case ScatterAllgather:
		bcastScatterAllgather(s, n, me, root, buf)
	case Linear:
		bcastLinear(s, n, me, root, buf)
	default:
		bcastBinomial(s, n, me, root, buf)
	}
	return s, nil
}

// bcastBinomial: relative rank r receives from r minus its lowest set bit
// and sends to r+2^k for every 2^k below that bit, largest first, so the
// message reaches every rank in ⌈log2 n⌉ steps.
func bcastBinomial(s *schedule, n, me, root int, buf []byte) {
	rel := (me - root + n) % n
	abs := func(r int) int { return (r + root) % n }
	mask := 1
	for ; mask < n; mask <<= 1 {
		if rel&mask != 0 {
			s.recv(abs(rel-mask), buf)
			s.wait()
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			s.send(abs(rel+mask), buf)
		}
	}
	s.wait()
}

// bcastLinear: the root posts a send of the whole buffer to every rank at
// once and each rank receives it straight from the root — one round. Over
// shared memory with a single-copy rendezvous every receiver reads the
// root's buffer itself, so the copies run in parallel on as many cores as
// there are, and no rank waits on another that is not the root.
func bcastLinear(s *schedule, n, me, root int, buf []byte) {
	if me != root {
		s.recv(root, buf)
		s.wait()
		return
	}
	for k := 1; k < n; k++ {
		s.send((root+k)%n, buf)
	}
	s.wait()
}

// bcastTree pipelines buf in segments down a tree of the given fan-out
// over relative ranks (2: the binary tree with children 2r+1, 2r+2; 1:
// the chain): a rank forwards segment i to its children while it receives
// segment i+1, so every level works at once once the pipe is full.
func bcastTree(s *schedule, n, me, root int, buf []byte, seg, fanout int) {
	rel := (me - root + n) % n
	abs := func(r int) int { return (r + root) % n }
	parent := (rel - 1) / fanout
	nseg := (len(buf) + seg - 1) / seg
	part := func(i int) []byte { return buf[i*seg : min((i+1)*seg, len(buf))] }
	if rel != 0 {
		s.recv(abs(parent), part(0))
		s.wait()
	}
	for i := range nseg {
		for k := 1; k <= fanout; k++ {
			if ch := fanout*rel + k; ch < n {
				s.send(abs(ch), part(i))
			}
		}
		if rel != 0 && i+1 < nseg {
			s.recv(abs(parent), part(i+1))
		}
		s.wait()
	}
}

// bcastScatterAllgather (van de Geijn): the root scatters buf in n blocks
// down a binomial tree — relative rank r gets the blocks of its subtree in
// one message — and a ring then passes every block around, so each rank
// sends and receives about 2·len(buf) bytes whatever n.
func bcastScatterAllgather(s *schedule, n, me, root int, buf []byte) {
	rel := (me - root + n) % n
	abs := func(r int) int { return (r + root) % n }
	off := s.blocks(len(buf), 1, n)
	span := func(lo, hi int) []byte { return buf[off[lo]:off[min(hi, n)]] }
	low := n // the span of rel's subtree: its lowest set bit (all for the root)
	if rel != 0 {
		low = rel & -rel
		s.recv(abs(rel-low), span(rel, rel+low))
		s.wait()
	}
	for mask := floorPow2(max(low-1, 1)); mask > 0; mask >>= 1 {
		if mask < low && rel+mask < n {
			s.send(abs(rel+mask), span(rel+mask, rel+2*mask))
		}
	}
	s.wait()
	ringAllgather(s, n, rel, 0, abs, off, buf)
}

// ringAllgather passes blocks around the ring of relative ranks, rank r
// starting with block r+first: in step k it sends block r+first−k to r+1
// and receives block r+first−k−1 from r−1 (mod n); off holds the n+1
// block offsets in buf.
func ringAllgather(s *schedule, n, rel, first int, abs func(int) int, off []int, buf []byte) {
	next, prev := abs((rel+1)%n), abs((rel-1+n)%n)
	for k := 0; k < n-1; k++ {
		sb, rb := (rel+first-k+2*n)%n, (rel+first-k-1+2*n)%n
		s.recv(prev, buf[off[rb]:off[rb+1]])
		s.send(next, buf[off[sb]:off[sb+1]])
		s.wait()
	}
}

// blocks returns the n+1 offsets of count elements of size bytes cut into
// n blocks (see package-level blocks), in memory the schedule owns.
func (s *schedule) blocks(count, size, n int) []int {
	b := s.tmpInts(n + 1)
	q, r := count/n, count%n
	at := 0
	for i := range n {
		b[i] = at * size
		at += q
		if i < r {
			at++
		}
	}
	b[n] = count * size
	return b
}
