package coll

import (
	"context"

	"github.com/gobtl/gobtl/pml"
)

// Allgather gathers every rank's send, in rank order, into every rank's
// recv: rank i's bytes land at recv[i*len(send):]. Every rank sends as
// many bytes; send may be this rank's own block of recv (in place).
func (c *Comm) Allgather(ctx context.Context, send, recv []byte) error {
	if done, err := c.nodeAllgather(ctx, send, recv); done {
		return err
	}
	s, err := c.allgather(send, recv)
	if err != nil {
		return err
	}
	return c.block(ctx, s)
}

// Iallgather starts an Allgather; neither buffer may be touched until its
// request completes.
func (c *Comm) Iallgather(send, recv []byte) (*pml.Request, error) {
	s, err := c.allgather(send, recv)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(s)
}

func (c *Comm) allgather(send, recv []byte) (*schedule, error) {
	n, me := c.Size(), c.Rank()
	b := len(send)
	if len(recv) < n*b {
		return nil, errf("allgather", "%d ranks' %d bytes into %d", n, b, len(recv))
	}
	recv = recv[:n*b]
	alg, _ := c.t.decide(KindAllgather, n, b)
	if alg == RecursiveDoubling && !pow2(n) {
		alg = Bruck
	}
	s := c.begin(KindAllgather, alg, call{root: -1, bytes: b})
	if b > 0 {
		mine := recv[me*b : (me+1)*b]
		switch alg {
		case Bruck:
			allgatherBruck(s, n, me, send, recv)
		case RecursiveDoubling:
			s.copy(mine, send)
			allgatherRecursiveDoubling(s, n, me, b, recv)
		case Linear:
			allgatherLinear(s, n, me, send, recv)
		default:
			s.copy(mine, send)
			off := s.tmpInts(n + 1)
			for i := range off {
				off[i] = i * b
			}
			ringAllgather(s, n, me, 0, func(r int) int { return r }, off, recv)
		}
	}
	return s, nil
}

// allgatherRecursiveDoubling (a power-of-two job): in step k rank r swaps
// its window of 2^k blocks with r XOR 2^k, doubling it. The steps are
// exchanges but go as plain sends: as exchanges sm pipelines them up to
// 512 KiB on a node with more ranks than CPUs, and 8 ranks on 2 CPUs then
// took 48 ms a call of 256 KiB blocks against 16 by CMA (4 alternating
// pairs; 64 KiB: no difference).
func allgatherRecursiveDoubling(s *schedule, n, me, b int, recv []byte) {
	for mask := 1; mask < n; mask <<= 1 {
		lo := me &^ (mask - 1)
		plo := lo ^ mask
		peer := me ^ mask
		s.recv(peer, recv[plo*b:(plo+mask)*b])
		s.send(peer, recv[lo*b:(lo+mask)*b])
		s.wait()
	}
}

// allgatherLinear: every rank posts its block to every other rank and a
// receive from each at once, in one round.
func allgatherLinear(s *schedule, n, me int, send, recv []byte) {
	b := len(send)
	for i := 1; i < n; i++ {
		r := (me - i + n) % n
		s.recv(r, recv[r*b:(r+1)*b])
	}
	for i := 1; i < n; i++ {
		s.send((me+i)%n, send)
	}
	s.copy(recv[me*b:(me+1)*b], send)
	s.wait()
}

// allgatherBruck: a rank keeps the blocks of ranks r, r+1, … in that
// order in a scratch buffer; in step k it sends the first min(2^k, n−2^k)
// to r−2^k and appends as many from r+2^k, so ⌈log2 n⌉ steps fill it for
// any n; a rotation then puts every block in its place.
func allgatherBruck(s *schedule, n, me int, send, recv []byte) {
	b := len(send)
	t := s.tmp(n * b)
	s.copy(t[:b], send)
	for k := 1; k < n; k <<= 1 {
		m := min(k, n-k)
		s.recv((me+k)%n, t[k*b:(k+m)*b])
		s.send((me-k+n)%n, t[:m*b])
		s.wait()
	}
	// t holds ranks me, me+1, …: rotate into rank order.
	s.copy(recv[me*b:], t[:(n-me)*b])
	s.copy(recv[:me*b], t[(n-me)*b:])
}

// Allgatherv gathers every rank's send into every rank's recv: rank i's
// counts[i] bytes land at recv[displs[i]:]. Blocks go round a ring.
func (c *Comm) Allgatherv(ctx context.Context, send, recv []byte, counts, displs []int) error {
	n, me := c.Size(), c.Rank()
	if err := checkV("allgatherv", n, len(recv), counts, displs); err != nil {
		return err
	}
	if len(send) != counts[me] {
		return errf("allgatherv", "send holds %d bytes, counts[%d] says %d", len(send), me, counts[me])
	}
	s := c.begin(KindAllgather, Ring, call{root: -1, bytes: countsSig(counts)})
	s.copy(recv[displs[me]:displs[me]+counts[me]], send)
	next, prev := (me+1)%n, (me-1+n)%n
	for k := 0; k < n-1; k++ {
		sb, rb := (me-k+n)%n, (me-k-1+n)%n
		s.recv(prev, recv[displs[rb]:displs[rb]+counts[rb]])
		s.send(next, recv[displs[sb]:displs[sb]+counts[sb]])
		s.wait()
	}
	return c.block(ctx, s)
}

// checkV validates a vector variant's counts and displacements against a
// buffer of size bytes.
func checkV(what string, n, size int, counts, displs []int) error {
	if len(counts) < n || len(displs) < n {
		return errf(what, "%d counts and %d displacements for %d ranks", len(counts), len(displs), n)
	}
	for i := range n {
		if counts[i] < 0 || displs[i] < 0 || displs[i]+counts[i] > size {
			return errf(what, "block %d (%d bytes at %d) outside a %d-byte buffer", i, counts[i], displs[i], size)
		}
	}
	return nil
}
