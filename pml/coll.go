package pml

import (
	"context"
	"time"
)

// Barrier returns when every rank of c has entered it (dissemination: in
// round k each rank signals rank+2^k and waits for rank-2^k), on c's
// collective context. It is the PML's own fence — Close's finalize meets
// the other ranks with it, under a deadline — and the barrier of programs
// that drive the PML directly (transport tests, the paper experiments);
// the collective layer, package coll, has the others, chosen by size.
func (c *Comm) Barrier() error { return c.barrier(0) }

func (c *Comm) barrier(deadline time.Duration) error {
	n, me := c.Size(), c.Rank()
	x := c.coll
	ctx := context.Background()
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
