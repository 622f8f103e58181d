package coll

import (
	"context"

	"github.com/gobtl/gobtl/pml"
)

// Gather collects every rank's send, in rank order, into root's recv:
// rank i's bytes land at recv[i*len(send):]. Every rank sends as many
// bytes; recv matters on the root only, and send may be the root's own
// block of recv (in place).
func (c *Comm) Gather(ctx context.Context, send, recv []byte, root int) error {
	s, err := c.gather(send, recv, root)
	if err != nil {
		return err
	}
	return c.block(ctx, s)
}

// Igather starts a Gather; neither buffer may be touched until its
// request completes.
func (c *Comm) Igather(send, recv []byte, root int) (*pml.Request, error) {
	s, err := c.gather(send, recv, root)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(s)
}

func (c *Comm) gather(send, recv []byte, root int) (*schedule, error) {
	if err := c.checkRoot("gather", root); err != nil {
		return nil, err
	}
	n, me := c.Size(), c.Rank()
	b := len(send)
	if me == root && len(recv) < n*b {
		return nil, errf("gather", "%d ranks' %d bytes into %d", n, b, len(recv))
	}
	alg, _ := c.t.decide(KindGather, n, b)
	s := c.begin(KindGather, alg, call{root: root, bytes: b})
	if alg == Binomial {
		gatherBinomial(s, n, me, root, send, recv)
	} else {
		counts, displs := s.equal(n, b)
		gatherLinear(s, n, me, root, send, recv, counts, displs)
	}
	return s, nil
}

// Gatherv collects every rank's send into root's recv: rank i's counts[i]
// bytes land at recv[displs[i]:] (counts and displs matter on the root).
func (c *Comm) Gatherv(ctx context.Context, send, recv []byte, counts, displs []int, root int) error {
	if err := c.checkRoot("gatherv", root); err != nil {
		return err
	}
	n, me := c.Size(), c.Rank()
	if me == root {
		if err := checkV("gatherv", n, len(recv), counts, displs); err != nil {
			return err
		}
		if len(send) != counts[me] {
			return errf("gatherv", "the root sends %d bytes, counts[%d] says %d", len(send), me, counts[me])
		}
	}
	s := c.begin(KindGather, Linear, call{root: root})
	gatherLinear(s, n, me, root, send, recv, counts, displs)
	return c.block(ctx, s)
}

// equal returns the counts and displacements of n blocks of b bytes.
func (s *schedule) equal(n, b int) (counts, displs []int) {
	counts, displs = s.tmpInts(n), s.tmpInts(n)
	for i := range n {
		counts[i], displs[i] = b, i*b
	}
	return counts, displs
}

// gatherLinear: the root posts a receive from every rank at once.
func gatherLinear(s *schedule, n, me, root int, send, recv []byte, counts, displs []int) {
	if me != root {
		s.send(root, send)
		s.wait()
		return
	}
	s.copy(recv[displs[me]:displs[me]+counts[me]], send)
	for i := range n {
		if i != me {
			s.recv(i, recv[displs[i]:displs[i]+counts[i]])
		}
	}
	s.wait()
}

// gatherBinomial: relative rank r collects the blocks of its subtree —
// relative ranks r … r+lowbit(r)−1, contiguous — from its children and
// sends them to its parent in one message; the root rotates them into
// rank order.
func gatherBinomial(s *schedule, n, me, root int, send, recv []byte) {
	b := len(send)
	rel := (me - root + n) % n
	abs := func(r int) int { return (r + root) % n }
	low := n
	if rel != 0 {
		low = rel & -rel
	}
	sub := min(low, n-rel) // blocks in this rank's subtree
	var t []byte
	if rel == 0 && root == 0 {
		t = recv[:n*b]
	} else {
		t = s.tmp(sub * b)
	}
	s.copy(t[:b], send)
	for mask := 1; mask < low && rel+mask < n; mask <<= 1 {
		k := min(mask, n-rel-mask)
		s.recv(abs(rel+mask), t[mask*b:(mask+k)*b])
	}
	s.wait()
	if rel != 0 {
		s.send(abs(rel-low), t)
		s.wait()
		return
	}
	if root != 0 { // t holds ranks root, root+1, …
		s.copy(recv[root*b:n*b], t[:(n-root)*b])
		s.copy(recv[:root*b], t[(n-root)*b:])
	}
}

// Scatter sends block i of root's send (len(recv) bytes at
// send[i*len(recv):]) to rank i's recv. send matters on the root only;
// recv may be the root's own block of send (in place).
func (c *Comm) Scatter(ctx context.Context, send, recv []byte, root int) error {
	s, err := c.scatter(send, recv, root)
	if err != nil {
		return err
	}
	return c.block(ctx, s)
}

// Iscatter starts a Scatter; neither buffer may be touched until its
// request completes.
func (c *Comm) Iscatter(send, recv []byte, root int) (*pml.Request, error) {
	s, err := c.scatter(send, recv, root)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(s)
}

func (c *Comm) scatter(send, recv []byte, root int) (*schedule, error) {
	if err := c.checkRoot("scatter", root); err != nil {
		return nil, err
	}
	n, me := c.Size(), c.Rank()
	b := len(recv)
	if me == root && len(send) < n*b {
		return nil, errf("scatter", "%d ranks' %d bytes from %d", n, b, len(send))
	}
	alg, _ := c.t.decide(KindScatter, n, b)
	s := c.begin(KindScatter, alg, call{root: root, bytes: b})
	if alg == Binomial {
		scatterBinomial(s, n, me, root, send, recv)
	} else {
		counts, displs := s.equal(n, b)
		scatterLinear(s, n, me, root, send, recv, counts, displs)
	}
	return s, nil
}

// Scatterv sends counts[i] bytes at root's send[displs[i]:] to rank i's
// recv (counts and displs matter on the root).
func (c *Comm) Scatterv(ctx context.Context, send, recv []byte, counts, displs []int, root int) error {
	if err := c.checkRoot("scatterv", root); err != nil {
		return err
	}
	n, me := c.Size(), c.Rank()
	if me == root {
		if err := checkV("scatterv", n, len(send), counts, displs); err != nil {
			return err
		}
		if len(recv) != counts[me] {
			return errf("scatterv", "the root receives %d bytes, counts[%d] says %d", len(recv), me, counts[me])
		}
	}
	s := c.begin(KindScatter, Linear, call{root: root})
	scatterLinear(s, n, me, root, send, recv, counts, displs)
	return c.block(ctx, s)
}

// scatterLinear: the root posts a send to every rank at once.
func scatterLinear(s *schedule, n, me, root int, send, recv []byte, counts, displs []int) {
	if me != root {
		s.recv(root, recv)
		s.wait()
		return
	}
	for i := range n {
		if i != me {
			s.send(i, send[displs[i]:displs[i]+counts[i]])
		}
	}
	s.copy(recv, send[displs[me]:displs[me]+counts[me]])
	s.wait()
}

// scatterBinomial is gatherBinomial backwards: the root rotates send into
// relative order, and every rank hands each child its subtree's blocks.
func scatterBinomial(s *schedule, n, me, root int, send, recv []byte) {
	b := len(recv)
	rel := (me - root + n) % n
	abs := func(r int) int { return (r + root) % n }
	low := n
	if rel != 0 {
		low = rel & -rel
	}
	sub := min(low, n-rel)
	var t []byte
	switch {
	case rel == 0 && root == 0:
		t = send[:n*b]
	case rel == 0:
		t = s.tmp(n * b)
		s.copy(t[:(n-root)*b], send[root*b:n*b])
		s.copy(t[(n-root)*b:], send[:root*b])
	default:
		t = s.tmp(sub * b)
		s.recv(abs(rel-low), t)
		s.wait()
	}
	for mask := floorPow2(max(low-1, 1)); mask > 0; mask >>= 1 {
		if mask < low && rel+mask < n {
			k := min(mask, n-rel-mask)
			s.send(abs(rel+mask), t[mask*b:(mask+k)*b])
		}
	}
	s.copy(recv, t[:b])
	s.wait()
}
