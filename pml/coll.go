package pml

import "time"

// Collectives over point-to-point on the communicator's second context, so
// they never match user messages. They are simple, correct algorithms for
// the benchmarks and tests, not tuned ones.

type collState struct {
	reqs []*Request
}

// Barrier returns when every rank has entered it (dissemination: in round
// k each rank signals rank+2^k and waits for rank-2^k).
func (c *Comm) Barrier() error { return c.barrier(0) }

func (c *Comm) barrier(deadline time.Duration) error {
	n, me := c.Size(), c.Rank()
	round := 0
	for k := 1; k < n; k <<= 1 {
		r, err := c.start(reqRecv, c.ctx+1, nil, (me-k+n)%n, round)
		if err != nil {
			return err
		}
		s, err := c.start(reqSend, c.ctx+1, nil, (me+k)%n, round)
		if err != nil {
			return err
		}
		if _, err := c.wait(s, deadline); err != nil {
			c.Cancel(r)
			return err
		}
		if _, err := c.wait(r, deadline); err != nil {
			c.Cancel(r)
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
			if _, err := c.recvOn(c.ctx+1, buf, (rel-mask+root)%n, 1<<20); err != nil {
				return err
			}
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			if err := c.sendOn(c.ctx+1, buf, (rel+mask+root)%n, 1<<20); err != nil {
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
	rs := c.coll.reqs[:0]
	for i := 1; i < n; i++ {
		src := (me - i + n) % n
		r, err := c.start(reqRecv, c.ctx+1, recv[src*block:(src+1)*block], src, 1<<21)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	for i := 1; i < n; i++ {
		dst := (me + i) % n
		r, err := c.start(reqSend, c.ctx+1, send[dst*block:(dst+1)*block], dst, 1<<21)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	err := c.Waitall(rs)
	c.coll.reqs = rs[:0]
	return err
}

func (c *Comm) sendOn(ctx uint32, buf []byte, dest, tag int) error {
	r, err := c.start(reqSend, ctx, buf, dest, tag)
	if err != nil {
		return err
	}
	_, err = c.Wait(r)
	return err
}

func (c *Comm) recvOn(ctx uint32, buf []byte, src, tag int) (Status, error) {
	r, err := c.start(reqRecv, ctx, buf, src, tag)
	if err != nil {
		return Status{}, err
	}
	return c.Wait(r)
}
