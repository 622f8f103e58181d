package coll

import (
	"context"

	"github.com/gobtl/gobtl/pml"
)

// checkVector validates a vector of op's elements.
func checkVector(what string, op Op, v []byte) error {
	if !op.valid() {
		return errf(what, "no operation")
	}
	if len(v)%op.Size != 0 {
		return errf(what, "%d bytes are not whole elements of %d bytes", len(v), op.Size)
	}
	return nil
}

// Reduce combines every rank's send with op into root's recv (as long as
// send; ignored on the other ranks, which may pass nil). recv may be send
// (in place).
func (c *Comm) Reduce(ctx context.Context, send, recv []byte, op Op, root int) error {
	if done, err := c.nodeReduce(ctx, send, recv, op, root); done {
		return err
	}
	s, err := c.reduce(send, recv, op, root)
	if err != nil {
		return err
	}
	return c.block(ctx, s)
}

// Ireduce starts a Reduce; neither buffer may be touched until its
// request completes.
func (c *Comm) Ireduce(send, recv []byte, op Op, root int) (*pml.Request, error) {
	s, err := c.reduce(send, recv, op, root)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(s)
}

func (c *Comm) reduce(send, recv []byte, op Op, root int) (*schedule, error) {
	if err := c.checkRoot("reduce", root); err != nil {
		return nil, err
	}
	if err := checkVector("reduce", op, send); err != nil {
		return nil, err
	}
	n, me := c.Size(), c.Rank()
	if me == root && len(recv) < len(send) {
		return nil, errf("reduce", "a %d-byte result into %d bytes", len(send), len(recv))
	}
	alg, seg := c.t.decide(KindReduce, n, len(send))
	if !op.Commutative || len(send) <= seg {
		alg = Binomial
	}
	s := c.begin(KindReduce, alg, call{root: root, bytes: len(send), op: op})
	s.op = op
	var result []byte
	if me == root {
		result = recv[:len(send)]
	}
	switch alg {
	case Binary:
		reduceTree(s, n, me, root, send, result, seg)
	default:
		reduceBinomial(s, n, me, root, send, result)
	}
	return s, nil
}

// reduceBinomial: relative rank r receives the partial results of r+2^k
// while bit k of r is clear, combining each into its own, then sends its
// result to r−2^k. A rank's partial covers the contiguous relative ranks
// [r, r+2^k), and it combines what comes from above after its own, so an
// operation that does not commute is reduced in rank order — for which
// the ranks are not rotated: the result is reduced to rank 0 and sent on
// to the root. result is the root's buffer (nil elsewhere).
func reduceBinomial(s *schedule, n, me, root int, send, result []byte) {
	top := root
	if !s.op.Commutative {
		top = 0
	}
	rel := (me - top + n) % n
	abs := func(r int) int { return (r + top) % n }
	acc := result
	if me != root || me != top {
		acc = s.tmp(len(send))
	}
	s.copy(acc, send)
	tmp := s.tmp(len(send))
	for mask := 1; mask < n; mask <<= 1 {
		if rel&mask != 0 {
			s.send(abs(rel-mask), acc)
			s.wait()
			break
		}
		if src := rel | mask; src < n {
			s.recv(abs(src), tmp)
			s.wait()
			s.reduce(acc, tmp)
		}
	}
	switch {
	case top == root:
	case me == top:
		s.send(root, acc)
		s.wait()
	case me == root:
		s.recv(top, result)
		s.wait()
	}
}

// reduceTree pipelines a commutative reduction up a binary tree over
// relative ranks in segments: a rank combines segment i of its children's
// partials into its own and sends it up while segment i+1 arrives (two
// buffers per child alternate).
func reduceTree(s *schedule, n, me, root int, send, acc []byte, seg int) {
	seg -= seg % s.op.Size
	rel := (me - root + n) % n
	abs := func(r int) int { return (r + root) % n }
	if acc == nil {
		acc = s.tmp(len(send))
	}
	s.copy(acc, send)
	nseg := (len(send) + seg - 1) / seg
	part := func(b []byte, i int) []byte { return b[i*seg : min((i+1)*seg, len(b))] }
	var kids [2]int
	var bufs [2][2][]byte // [child][parity]
	nk := 0
	for k := 1; k <= 2; k++ {
		if ch := 2*rel + k; ch < n {
			kids[nk] = abs(ch)
			bufs[nk][0], bufs[nk][1] = s.tmp(min(seg, len(send))), s.tmp(min(seg, len(send)))
			nk++
		}
	}
	post := func(i int) {
		for k := range nk {
			s.recv(kids[k], bufs[k][i%2][:len(part(acc, i))])
		}
	}
	post(0)
	s.wait()
	for i := range nseg {
		for k := range nk {
			s.reduce(part(acc, i), bufs[k][i%2][:len(part(acc, i))])
		}
		if i+1 < nseg {
			post(i + 1)
		}
		if rel != 0 {
			s.send(abs((rel-1)/2), part(acc, i))
		}
		s.wait()
	}
}

// detach returns send, or a copy of it taken now when it overlaps recv.
// Most algorithms copy send into place in their first step, before any
// message can arrive, and never read it again, so send may be recv or a
// part of it (in place); one that sends from send while receives land in
// recv (alltoall) detaches it first.
func (s *schedule) detach(send, recv []byte) []byte {
	if !overlap(send, recv) {
		return send
	}
	t := s.tmp(len(send))
	copy(t, send)
	return t
}
