package coll_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gobtl/gobtl/coll"
)

// TestACollectiveWhoseContextEndsGoesOnAsItsRequestAndThenLeavesTheBuffersAlone:
// rank 0 calls a collective with a context that has ended, before any
// other rank has joined it. The call returns a *PendingError whose
// request is not done; once the others join, waiting for that request
// finds the collective's result in rank 0's buffers — the collective went
// on with them — and after it the buffers are the caller's: rank 0
// overwrites them, the job runs more collectives, and nothing writes to
// them again. A request that completed before the collective had finished
// with the buffers fails the result or the overwrite check (and the race
// detector).
func TestACollectiveWhoseContextEndsGoesOnAsItsRequestAndThenLeavesTheBuffersAlone(t *testing.T) {
	const n, size = 4, 16 << 10 // rendezvous over the harness's 1 KiB eager limit, in several rounds
	for _, tc := range pendingCases(n, size) {
		t.Run(tc.name, func(t *testing.T) {
			ready := make(chan struct{})
			withJob(t, n, tc.tu, func(c *coll.Comm) error { return tc.check(c, ready) })
		})
	}
}

// pendingCase is a collective rank 0 starts with an ended context.
type pendingCase struct {
	name string
	tu   *coll.Tuning
	// run calls the collective.
	run          func(ctx context.Context, c *coll.Comm, send, recv []byte) error
	sendN, recvN int           // rank 0's send and receive lengths
	want         func() []byte // rank 0's result
	sendFilled   bool          // send holds the rank's values
}

func pendingCases(n, size int) []pendingCase {
	return []pendingCase{
		{"allreduce ring", forced("allreduce", "ring", 0),
			func(ctx context.Context, c *coll.Comm, send, recv []byte) error {
				return c.Allreduce(ctx, send, recv, sumInt64)
			}, size, size, func() []byte { return fold(sumInt64, size, 0, n, 1) }, true},
		{"bcast pipeline from rank 1", forced("bcast", "pipeline", 2048),
			func(ctx context.Context, c *coll.Comm, _, recv []byte) error {
				if c.Rank() == 1 {
					fill(recv, 1, 1)
				}
				return c.Bcast(ctx, recv, 1)
			}, 0, size, func() []byte { return fill(make([]byte, size), 1, 1) }, false},
		{"alltoall pairwise", forced("alltoall", "pairwise", 0),
			func(ctx context.Context, c *coll.Comm, send, recv []byte) error {
				return c.Alltoall(ctx, send, recv, size)
			}, n * size, n * size, func() []byte {
				want := make([]byte, n*size)
				for r := range n {
					fill(want[r*size:(r+1)*size], r, 1)
				}
				return want
			}, true},
	}
}

// check is one rank's part. Rank 0 notes what is wrong and goes on with
// the others, so that a broken rule fails the test rather than hanging
// the ranks that wait for it.
func (tc pendingCase) check(c *coll.Comm, ready chan struct{}) error {
	send, recv := make([]byte, tc.sendN), make([]byte, tc.recvN)
	if tc.sendFilled {
		fill(send, c.Rank(), 1)
	}
	var wrong error
	if c.Rank() != 0 {
		<-ready
		if err := tc.run(bg, c, send, recv); err != nil {
			return err
		}
	} else {
		wrong = cancelled(c, ready, func(ctx context.Context) error { return tc.run(ctx, c, send, recv) })
		if err := diff("rank 0's result, once the request completed", recv, tc.want()); err != nil {
			wrong = errors.Join(wrong, err)
		}
		// The buffers are the caller's again.
		for i := range send {
			send[i] = 0xAA
		}
		for i := range recv {
			recv[i] = 0x55
		}
	}
	// More traffic on the communicator: nothing of the collective may
	// reach rank 0's buffers any more.
	if err := moreTraffic(c); err != nil {
		return err
	}
	if c.Rank() == 0 {
		if i := slices.IndexFunc(send, func(b byte) bool { return b != 0xAA }); i >= 0 {
			wrong = errors.Join(wrong, fmt.Errorf("send byte %d is %#x after the request completed and was overwritten", i, send[i]))
		}
		if i := slices.IndexFunc(recv, func(b byte) bool { return b != 0x55 }); i >= 0 {
			wrong = errors.Join(wrong, fmt.Errorf("receive byte %d is %#x after the request completed and was overwritten", i, recv[i]))
		}
	}
	return wrong
}

// moreTraffic runs a barrier, an allreduce and a barrier.
func moreTraffic(c *coll.Comm) error {
	if err := c.Barrier(bg); err != nil {
		return err
	}
	v := fill(make([]byte, 64), c.Rank(), 2)
	if err := c.Allreduce(bg, v, v, sumInt64); err != nil {
		return err
	}
	return c.Barrier(bg)
}

// cancelled runs call with a context that has ended, expects a
// *PendingError whose request is not done while the other ranks have not
// joined (they wait for ready), lets them join, and waits for it.
func cancelled(c *coll.Comm, ready chan struct{}, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	err := call(ctx)
	var p *coll.PendingError
	if !errors.As(err, &p) || !errors.Is(err, context.Canceled) || p.Request == nil {
		close(ready)
		return fmt.Errorf("a collective whose context ended returned %v, want a *PendingError wrapping context.Canceled", err)
	}
	var wrong error
	if done, _, err := pmlOf(c).Test(p.Request); done || err != nil {
		wrong = fmt.Errorf("the request of a collective no other rank has joined: done %v, %v", done, err)
	}
	close(ready)
	if _, err := pmlOf(c).Wait(p.Request); err != nil {
		wrong = errors.Join(wrong, fmt.Errorf("the pending collective: %w", err))
	}
	return wrong
}

// TestASplitWhoseContextEndsReturnsTheContextsErrorAlone: Split's and
// Dup's exchanges run on buffers of their own, so a context that ends
// first leaves the caller nothing to wait for — the plain context error,
// not a *PendingError — and the exchange finishes in the background.
func TestASplitWhoseContextEndsReturnsTheContextsErrorAlone(t *testing.T) {
	withJob(t, 3, nil, func(c *coll.Comm) error {
		ctx := bg
		if c.Rank() == 0 {
			cctx, cancel := context.WithCancel(bg)
			cancel()
			ctx = cctx
		}
		d, err := c.Split(ctx, 0, 0)
		var p *coll.PendingError
		switch {
		case c.Rank() != 0 && err != nil:
			return err
		case c.Rank() == 0 && (!errors.Is(err, context.Canceled) || errors.As(err, &p) || d != nil):
			return fmt.Errorf("split with an ended context: %v, %v; want the context's error alone", d, err)
		}
		d2, err := c.Dup(ctx)
		switch {
		case c.Rank() != 0 && err != nil:
			return err
		case c.Rank() == 0 && (!errors.Is(err, context.Canceled) || errors.As(err, &p) || d2 != nil):
			return fmt.Errorf("dup with an ended context: %v, %v; want the context's error alone", d2, err)
		}
		// Rank 0's exchanges finish as it waits here.
		return c.Barrier(bg)
	})
}
