package coll

import "context"

// ReduceScatterBlock combines every rank's send (n blocks of len(recv)
// bytes) with op and leaves block i of the result in rank i's recv.
func (c *Comm) ReduceScatterBlock(ctx context.Context, send, recv []byte, op Op) error {
	n, me := c.Size(), c.Rank()
	b := len(recv)
	if err := checkVector("reduce_scatter_block", op, recv); err != nil {
		return err
	}
	if len(send) < n*b {
		return errf("reduce_scatter_block", "%d blocks of %d bytes from %d", n, b, len(send))
	}
	send = send[:n*b]
	alg, _ := c.t.decide(KindReduceScatter, n, b)
	switch {
	case !op.Commutative:
		alg = ReduceScatterv
	case alg == RecursiveHalving && !pow2(n):
		alg = Ring
	}
	s := c.begin(KindReduceScatter, alg, call{root: -1, bytes: b, op: op})
	s.op = op
	if b == 0 {
		return c.block(ctx, s)
	}
	switch alg {
	case ReduceScatterv:
		var all []byte
		if me == 0 {
			all = s.tmp(n * b)
		}
		reduceBinomial(s, n, me, 0, send, all)
		scatterBinomial(s, n, me, 0, all, recv)
	case RecursiveHalving:
		acc, tmp := s.tmp(n*b), s.tmp(n*b)
		s.copy(acc, send)
		lo, hi := 0, n
		for mask := n / 2; mask > 0; mask /= 2 {
			mid := (lo + hi) / 2
			keepLo, keepHi, giveLo, giveHi := lo, mid, mid, hi
			if me&mask != 0 {
				keepLo, keepHi, giveLo, giveHi = mid, hi, lo, mid
			}
			s.recv(me^mask, tmp[keepLo*b:keepHi*b])
			s.exchange(me^mask, acc[giveLo*b:giveHi*b])
			s.wait()
			s.reduce(acc[keepLo*b:keepHi*b], tmp[keepLo*b:keepHi*b])
			lo, hi = keepLo, keepHi
		}
		s.copy(recv, acc[me*b:(me+1)*b])
	default:
		// The ring: block k starts at rank k+1 and is combined hop by hop
		// until it ends at rank k, n−1 hops later.
		acc, t := s.tmp(n*b), s.tmp(b)
		s.copy(acc, send)
		next, prev := (me+1)%n, (me-1+n)%n
		for k := 0; k < n-1; k++ {
			sb, rb := (me-1-k+2*n)%n, (me-2-k+2*n)%n
			s.recv(prev, t)
			s.send(next, acc[sb*b:(sb+1)*b])
			s.wait()
			s.reduce(acc[rb*b:(rb+1)*b], t)
		}
		s.copy(recv, acc[me*b:(me+1)*b])
	}
	return c.block(ctx, s)
}

// Scan leaves in rank i's recv the combination of the sends of ranks
// 0…i, in rank order. recv may be send (in place).
func (c *Comm) Scan(ctx context.Context, send, recv []byte, op Op) error {
	return c.scan(ctx, send, recv, op, false)
}

// Exscan leaves in rank i's recv the combination of the sends of ranks
// 0…i−1; rank 0's recv is left as it was (MPI leaves it undefined).
func (c *Comm) Exscan(ctx context.Context, send, recv []byte, op Op) error {
	return c.scan(ctx, send, recv, op, true)
}

// scan is recursive doubling on prefixes (MPICH's): in step k rank r
// swaps its partial — the combination of ranks r&^(2^k−1) … r's block —
// with r XOR 2^k; a partial from below extends both the partial and the
// result on the left, one from above only the partial on the right, so
// the order of ranks holds for any operation.
func (c *Comm) scan(ctx context.Context, send, recv []byte, op Op, exclusive bool) error {
	what := "scan"
	if exclusive {
		what = "exscan"
	}
	if err := checkVector(what, op, send); err != nil {
		return err
	}
	if len(recv) < len(send) {
		return errf(what, "a %d-byte result into %d bytes", len(send), len(recv))
	}
	recv = recv[:len(send)]
	n, me := c.Size(), c.Rank()
	alg, _ := c.t.decide(KindScan, n, len(send))
	cl := call{root: -1, bytes: len(send), op: op}
	if exclusive {
		cl.root = -2 // a scan and an exscan do not match
	}
	s := c.begin(KindScan, alg, cl)
	s.op = op
	if len(send) == 0 {
		return c.block(ctx, s)
	}
	l := len(send)
	partial, tmp, t2 := s.tmp(l), s.tmp(l), s.tmp(l)
	s.copy(partial, send)
	if !exclusive {
		s.copy(recv, send)
	}
	have := !exclusive // recv holds something to extend
	for mask := 1; mask < n; mask <<= 1 {
		peer := me ^ mask
		if peer >= n {
			continue
		}
		s.recv(peer, tmp)
		s.send(peer, partial)
		s.wait()
		if peer > me {
			s.reduce(partial, tmp)
			continue
		}
		// tmp holds ranks below: result = tmp ∘ result, partial = tmp ∘
		// partial.
		if have {
			s.copy(t2, tmp)
			s.reduce(t2, recv)
			s.copy(recv, t2)
		} else {
			s.copy(recv, tmp)
			have = true
		}
		s.reduce(tmp, partial)
		s.copy(partial, tmp)
	}
	return c.block(ctx, s)
}
