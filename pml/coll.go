package pml

import (
	gocontext "context"
	"time"
)

// Barrier returns when every rank of c has entered it (dissemination: in
// round k each rank signals rank+2^k and waits for rank-2^k), on c's
// collective context. It is the PML's own fence — Close's finalize meets
// the other ranks with it, under a deadline — and the barrier of programs
// that drive the PML directly (transport tests, the paper experiments);
// Bcast and Alltoall below are simple ones for the same users.
func (c *Comm) Barrier() error { return c.barrier(0) }

func (c *Comm) barrier(deadline time.Duration) error {
	n, me := c.Size(), c.Rank()
	x := c.coll
	ctx := gocontext.Background()
	round := 0
	for k := 1; k < n; k <<= 1 {
		r, err := x.Irecv(nil, (me-k+n)%n, round)
		if err != nil {
			return err
		}
		s, err := x.Isend(nil, (me+k)%n, round)
		if err != nil {
			x.Cancel(r)
			return err
		}
		if _, err, _ := x.wait(ctx, s, deadline); err != nil {
			x.Cancel(r)
			return err
		}
		if _, err, _ := x.wait(ctx, r, deadline); err != nil {
			x.Cancel(r)
			return err
		}
		round++
	}
	return nil
}

// Bcast copies root's buf to every rank's buf (binomial tree).
func (c *Comm) Bcast(buf []byte, root int) error {
	if err := c.check(root, 0, false); err != nil {
		return err
	}
	n := c.Size()
	rel := (c.Rank() - root + n) % n
	mask := 1
	for mask < n {
		if rel&mask != 0 {
			if _, err := c.coll.Recv(buf, (rel-mask+root)%n, 1<<20); err != nil {
				return err
			}
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			if err := c.coll.Send(buf, (rel+mask+root)%n, 1<<20); err != nil {
				return err
			}
		}
	}
	return nil
}

// Alltoall sends block bytes at send[i*block:] to rank i and receives
// rank i's block into recv[i*block:].
func (c *Comm) Alltoall(send, recv []byte, block int) error {
	n, me := c.Size(), c.Rank()
	if block < 0 || len(send) < n*block || len(recv) < n*block {
		return ErrInvalid
	}
	copy(recv[me*block:(me+1)*block], send[me*block:(me+1)*block])
	rs := make([]*Request, 0, 2*n)
	for i := 1; i < n; i++ {
		src := (me - i + n) % n
		r, err := c.coll.Irecv(recv[src*block:(src+1)*block], src, 1<<21)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	for i := 1; i < n; i++ {
		dst := (me + i) % n
		r, err := c.coll.Isend(send[dst*block:(dst+1)*block], dst, 1<<21)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	return c.Waitall(rs, nil)
}
