package coll

import (
	"context"
	"math/bits"

	"github.com/gobtl/gobtl/pml"
)

// Allreduce combines every rank's send with op into every rank's recv (as
// long as send). recv may be send (in place).
func (c *Comm) Allreduce(ctx context.Context, send, recv []byte, op Op) error {
	if done, err := c.nodeAllreduce(ctx, send, recv, op); done {
		return err
	}
	s, err := c.allreduce(send, recv, op)
	if err != nil {
		return err
	}
	return c.block(ctx, s)
}

// Iallreduce starts an allreduce; neither buffer may be touched until its
// request completes.
func (c *Comm) Iallreduce(send, recv []byte, op Op) (*pml.Request, error) {
	s, err := c.allreduce(send, recv, op)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(s)
}

func (c *Comm) allreduce(send, recv []byte, op Op) (*schedule, error) {
	if err := checkVector("allreduce", op, send); err != nil {
		return nil, err
	}
	if len(recv) < len(send) {
		return nil, errf("allreduce", "a %d-byte result into %d bytes", len(send), len(recv))
	}
	recv = recv[:len(send)]
	n, me := c.Size(), c.Rank()
	count := len(send) / op.Size
	alg, seg := c.t.decide(KindAllreduce, n, len(send))
	switch {
	case alg == Ring && (!op.Commutative || count < n),
		alg == Direct && count < n,
		alg == Rabenseifner && (!op.Commutative || count < floorPow2(n)):
		alg = RecursiveDoubling
	}
	if alg == Linear {
		if s := c.again(KindAllreduce, alg, send, recv); s != nil {
			if !sameOp(op, s.op) {
				s.resign(call{root: -1, bytes: len(send), op: op})
			}
			s.op = op
			return s, nil
		}
	}
	s := c.begin(KindAllreduce, alg, call{root: -1, bytes: len(send), op: op})
	s.op = op
	if n == 1 || count == 0 {
		s.copy(recv, send)
		return s, nil
	}
	switch alg {
	case Linear:
		allreduceLinear(s, n, me, send, recv)
		s.keep(send, recv)
	case Rabenseifner:
		allreduceRabenseifner(s, n, me, send, recv)
	case Ring:
		allreduceRing(s, n, me, send, recv)
	case Direct:
		allreduceDirect(s, n, me, send, recv)
	case ReduceBcast:
		var result []byte
		if me == 0 {
			result = recv
		}
		reduceBinomial(s, n, me, 0, send, result)
		bcastTree(s, n, me, 0, recv, seg, 2)
	default:
		allreduceRecursiveDoubling(s, n, me, send, recv)
	}
	return s, nil
}

// The folding of a job that is not a power of two, for the recursive
// algorithms (MPICH's): with p the largest power of two not above n and
// rem = n−p, ranks below 2·rem pair up — the odd one hands its vector to
// the even one below, sits out, and gets the result back at the end —
// leaving p ranks, renumbered 0..p−1.

// foldIn starts the fold: it returns this rank's number among the p, or
// -1 for a rank that sits out.
func foldIn(s *schedule, n, me int, acc, tmp []byte) (int, int) {
	p := floorPow2(n)
	rem := n - p
	switch {
	case me < 2*rem && me%2 == 1:
		s.send(me-1, acc)
		s.wait()
		return -1, p
	case me < 2*rem:
		s.recv(me+1, tmp)
		s.wait()
		s.reduce(acc, tmp) // the even rank is the lower
		return me / 2, p
	}
	return me - rem, p
}

// real is the rank of number v among the p ranks of a folded job.
func real(v, n, p int) int {
	if rem := n - p; v < rem {
		return 2 * v
	}
	return v + n - p
}

// foldOut ends the fold: the even ranks of the pairs send the result to
// the odd ones.
func foldOut(s *schedule, n, me int, acc []byte) {
	p := floorPow2(n)
	if rem := n - p; me < 2*rem {
		if me%2 == 1 {
			s.recv(me-1, acc)
		} else {
			s.send(me+1, acc)
		}
		s.wait()
	}
}

// allreduceRecursiveDoubling: in step k rank v exchanges its whole vector
// with v XOR 2^k and combines, the lower rank's part first; after log2 p
// steps every rank holds the reduction, computed on both sides of every
// exchange in the same order, hence the same bits on every rank.
//
// A small vector's receives are all posted before the first send, each
// into a buffer of its own (see prepostMax): a peer one step ahead — with
// more ranks than cores, one that ran while this rank did not — finds its
// message's receive waiting instead of leaving it unexpected, and this
// rank, once scheduled, finishes the steps whose messages are in without
// a receive to post between them.
func allreduceRecursiveDoubling(s *schedule, n, me int, send, acc []byte) {
	s.copy(acc, send)
	p := floorPow2(n)
	steps := bits.Len(uint(p)) - 1
	if me < 2*(n-p) && me%2 == 1 || steps == 0 || len(acc)*(steps+1) > prepostMax {
		// A rank that sits out has one receive, after its only send.
		tmp := s.tmp(len(acc))
		v, _ := foldIn(s, n, me, acc, tmp)
		if v >= 0 {
			for mask := 1; mask < p; mask <<= 1 {
				peer := real(v^mask, n, p)
				s.recv(peer, tmp)
				s.exchange(peer, acc)
				s.wait()
				recursiveDoublingCombine(s, v, mask, acc, tmp)
			}
		}
		foldOut(s, n, me, acc)
		return
	}
	// Every peer of this rank differs (the one it folds with, then
	// v XOR 2^k), so the receives may go in any order.
	v := me - (n - p)
	fold := me < 2*(n-p)
	var in, tmp []byte
	var first int
	if fold {
		v = me / 2
		in = s.tmp(len(acc))
		first = s.prepost(me+1, in)
	}
	var hs [bits.UintSize]int
	bufs := s.tmp(len(acc) * steps)
	for k := range steps {
		hs[k] = s.prepost(real(v^(1<<k), n, p), bufs[k*len(acc):(k+1)*len(acc)])
	}
	if fold {
		s.await(first)
		s.wait()
		s.reduce(acc, in) // the even rank is the lower
	}
	for k := range steps {
		mask := 1 << k
		tmp = bufs[k*len(acc) : (k+1)*len(acc)]
		s.exchange(real(v^mask, n, p), acc)
		s.await(hs[k])
		s.wait()
		recursiveDoublingCombine(s, v, mask, acc, tmp)
	}
	foldOut(s, n, me, acc)
}

// prepostMax bounds the scratch a recursive doubling allreduce takes to
// post all its receives at once (a vector per step): above it the
// messages go by rendezvous, whose unexpected handshake costs little next
// to the data.
const prepostMax = 64 << 10

// recursiveDoublingCombine folds the vector tmp received in the step of
// mask into acc, the lower ranks' part first.
func recursiveDoublingCombine(s *schedule, v, mask int, acc, tmp []byte) {
	if v&mask != 0 && !s.op.Commutative {
		// The peer holds the lower ranks: tmp ∘ acc.
		s.reduce(tmp, acc)
		s.copy(acc, tmp)
	} else {
		s.reduce(acc, tmp)
	}
}

// allreduceRabenseifner: a reduce-scatter by recursive halving — in step
// k a rank keeps half of its window of p blocks, sends the other half to
// v XOR p/2^(k+1) and combines the half it gets — leaves rank v with block
// v reduced; an allgather by recursive doubling brings every block back
// to every rank. Each block is reduced on one rank only, in a fixed order.
//
// On a power-of-two job with separate vectors, send is never copied: the
// first exchange sends from it, receives the peer's half into acc and
// combines this rank's half into that — the copy would have cost as much
// as a third of the reduce-scatter's arithmetic.
func allreduceRabenseifner(s *schedule, n, me int, send, acc []byte) {
	tmp := s.tmp(len(acc))
	direct := pow2(n) && !overlap(send, acc)
	v, p := me, n
	if !direct {
		s.copy(acc, send)
		v, p = foldIn(s, n, me, acc, tmp)
	}
	if v >= 0 {
		off := s.blocks(len(acc)/s.op.Size, s.op.Size, p)
		at := func(b []byte, lo, hi int) []byte { return b[off[lo]:off[hi]] }
		lo, hi := 0, p
		for mask := p / 2; mask > 0; mask /= 2 {
			peer := real(v^mask, n, p)
			mid := (lo + hi) / 2
			keepLo, keepHi, giveLo, giveHi := lo, mid, mid, hi
			if v&mask != 0 {
				keepLo, keepHi, giveLo, giveHi = mid, hi, lo, mid
			}
			if direct {
				s.recv(peer, at(acc, keepLo, keepHi))
				s.exchange(peer, at(send, giveLo, giveHi))
				s.wait()
				s.reduce(at(acc, keepLo, keepHi), at(send, keepLo, keepHi))
				direct = false
			} else {
				s.recv(peer, at(tmp, keepLo, keepHi))
				s.exchange(peer, at(acc, giveLo, giveHi))
				s.wait()
				s.reduce(at(acc, keepLo, keepHi), at(tmp, keepLo, keepHi))
			}
			lo, hi = keepLo, keepHi
		}
		for mask := 1; mask < p; mask *= 2 {
			peer := real(v^mask, n, p)
			w := hi - lo
			plo := lo ^ w // the peer's window, as wide as ours
			s.recv(peer, at(acc, plo, plo+w))
			s.exchange(peer, at(acc, lo, hi))
			s.wait()
			lo, hi = min(lo, plo), max(hi, plo+w)
		}
	}
	foldOut(s, n, me, acc)
}

// allreduceLinear: every rank sends its vector to every other one and
// folds the n vectors itself, in rank order — x0 ∘ x1 ∘ … ∘ xn−1, the
// serial fold, the same bits on every rank — in one round. It moves n−1
// vectors in and out of each rank where recursive doubling moves log2 n,
// but waits once instead of log2 n times (⌈log2 n⌉+2 with a fold): with
// more ranks than cores a round is a wait for ranks that are not running,
// and a rank scheduled once sends everything it has to send at once, so
// for a vector of a few words the rounds, not the messages, are the cost.
func allreduceLinear(s *schedule, n, me int, send, acc []byte) {
	l := len(acc)
	in := s.tmp(n * l) // rank r's vector at in[r*l:]
	slot := func(r int) []byte { return in[r*l : (r+1)*l] }
	for i := 1; i < n; i++ {
		r := (me - i + n) % n
		s.recv(r, slot(r))
	}
	for i := 1; i < n; i++ {
		s.send((me+i)%n, send)
	}
	// send may be acc: this rank's vector keeps its slot until the fold.
	s.copy(slot(me), send)
	s.wait()
	s.copy(acc, slot(0))
	for r := 1; r < n; r++ {
		s.reduce(acc, slot(r))
	}
}

// allreduceRing: n blocks go round the ring twice — first combined hop by
// hop (after n−1 steps rank r holds block r+1 reduced), then copied hop by
// hop to every rank.
func allreduceRing(s *schedule, n, me int, send, acc []byte) {
	s.copy(acc, send)
	off := s.blocks(len(acc)/s.op.Size, s.op.Size, n)
	tmp := s.tmp(off[1] - off[0]) // the largest block
	next, prev := (me+1)%n, (me-1+n)%n
	for k := 0; k < n-1; k++ {
		sb, rb := (me-k+n)%n, (me-k-1+n)%n
		t := tmp[:off[rb+1]-off[rb]]
		s.recv(prev, t)
		s.send(next, acc[off[sb]:off[sb+1]])
		s.wait()
		s.reduce(acc[off[rb]:off[rb+1]], t)
	}
	ringAllgather(s, n, me, 1, func(r int) int { return r }, off, acc)
}

// allreduceDirect: rank j owns block j. In the first round every rank
// sends block j of its vector to rank j and receives block me from every
// rank; it folds them in rank order, x0 ∘ x1 ∘ … ∘ xn−1 (so any operation,
// and the same bits whatever the timing); in the second it sends the
// folded block to every rank and receives every other block from its
// owner. Every block is combined on one rank only. A rank that runs can
// move all its messages of a round without waiting for any one peer to
// finish a step first: with more ranks than cores, the rounds, not the
// bytes, are what the ranks wait for.
func allreduceDirect(s *schedule, n, me int, send, acc []byte) {
	off := s.blocks(len(acc)/s.op.Size, s.op.Size, n)
	blk := func(b []byte, j int) []byte { return b[off[j]:off[j+1]] }
	w := off[1] - off[0] // the largest block
	in := s.tmp(n * w)   // rank r's block me at in[r*w:], r > 0
	slot := func(r int) []byte { return in[r*w : r*w+off[me+1]-off[me]] }
	mine := blk(send, me)
	if me != 0 && overlap(send, acc) {
		// Rank 0's block lands where this rank's own part is (in place).
		mine = s.tmp(len(mine))
		s.copy(mine, blk(send, me))
	}
	for i := 1; i < n; i++ {
		r := (me - i + n) % n
		if r == 0 {
			s.recv(r, blk(acc, me))
		} else {
			s.recv(r, slot(r))
		}
	}
	for i := 1; i < n; i++ {
		j := (me + i) % n
		s.send(j, blk(send, j))
	}
	if me == 0 {
		s.copy(blk(acc, 0), mine)
	}
	s.wait()
	for r := 1; r < n; r++ {
		if r == me {
			s.reduce(blk(acc, me), mine)
		} else {
			s.reduce(blk(acc, me), slot(r))
		}
	}
	for i := 1; i < n; i++ {
		r := (me - i + n) % n
		s.recv(r, blk(acc, r))
	}
	for i := 1; i < n; i++ {
		s.send((me+i)%n, blk(acc, me))
	}
	s.wait()
}
