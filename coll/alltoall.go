package coll

import (
	"context"

	"github.com/gobtl/gobtl/pml"
)

// Alltoall sends block bytes at send[i*block:] to rank i and receives
// rank i's block into recv[i*block:]. send may be recv (in place).
func (c *Comm) Alltoall(ctx context.Context, send, recv []byte, block int) error {
	s, err := c.alltoall(send, recv, block)
	if err != nil {
		return err
	}
	return c.block(ctx, s)
}

// Ialltoall starts an Alltoall; neither buffer may be touched until its
// request completes.
func (c *Comm) Ialltoall(send, recv []byte, block int) (*pml.Request, error) {
	s, err := c.alltoall(send, recv, block)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(s)
}

func (c *Comm) alltoall(send, recv []byte, block int) (*schedule, error) {
	n := c.Size()
	if block < 0 || len(send) < n*block || len(recv) < n*block {
		return nil, errf("alltoall", "%d ranks' blocks of %d bytes from %d into %d bytes", n, block, len(send), len(recv))
	}
	alg, _ := c.t.decide(KindAlltoall, n, block)
	s := c.begin(KindAlltoall, alg, call{root: -1, bytes: block})
	counts, displs := s.tmpInts(n), s.tmpInts(n)
	for i := range n {
		counts[i], displs[i] = block, i*block
	}
	alltoallv(s, n, c.Rank(), alg, send, counts, displs, recv, counts, displs)
	return s, nil
}

// Alltoallv sends sendCounts[i] bytes at send[sendDispls[i]:] to rank i
// and receives recvCounts[i] bytes from rank i into recv[recvDispls[i]:].
func (c *Comm) Alltoallv(ctx context.Context, send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int) error {
	n := c.Size()
	if err := checkV("alltoallv send", n, len(send), sendCounts, sendDispls); err != nil {
		return err
	}
	if err := checkV("alltoallv receive", n, len(recv), recvCounts, recvDispls); err != nil {
		return err
	}
	most := 0
	for i := range n {
		most = max(most, sendCounts[i], recvCounts[i])
	}
	alg, _ := c.t.decide(KindAlltoall, n, most)
	s := c.begin(KindAlltoall, alg, call{root: -1})
	alltoallv(s, n, c.Rank(), alg, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	return c.block(ctx, s)
}

// alltoallv schedules the exchange: linear posts every receive (from
// me−1, me−2, …) and every send (to me+1, me+2, …) at once and waits once;
// pairwise takes n−1 steps, sending to me+i and receiving from me−i in
// step i, so that a rank has one exchange in flight. The block a rank
// keeps is a copy.
func alltoallv(s *schedule, n, me int, alg Alg, send []byte, sc, sd []int, recv []byte, rc, rd []int) {
	send = s.detach(send, recv)
	s.copy(recv[rd[me]:rd[me]+rc[me]], send[sd[me]:sd[me]+sc[me]])
	for i := 1; i < n; i++ {
		src, dst := (me-i+n)%n, (me+i)%n
		s.recv(src, recv[rd[src]:rd[src]+rc[src]])
		if alg == Pairwise {
			s.send(dst, send[sd[dst]:sd[dst]+sc[dst]])
			s.wait()
		}
	}
	if alg != Pairwise {
		for i := 1; i < n; i++ {
			dst := (me + i) % n
			s.send(dst, send[sd[dst]:sd[dst]+sc[dst]])
		}
	}
	s.wait()
}
