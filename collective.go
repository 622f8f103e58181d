package gobtl

import (
	"context"
	"fmt"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// The collectives of a Comm, over bytes, from package coll; the typed
// reductions are the generic functions of reduce.go. Every blocking call
// has a form that takes a context first: when the context ends it returns
// ctx.Err(), and the collective goes on in the background — every rank
// takes part in it — with its buffers in use until it completes.

// Undefined is the color of a rank that joins no communicator in Split.
const Undefined = coll.Undefined

// Errors a program branches on, re-exported from core and coll.
var (
	// ErrTruncated: a message longer than its receive buffer (the buffer
	// holds what fit).
	ErrTruncated = core.ErrTruncated
	// ErrPeerLost: a rank, or the connection to it, is gone; the requests
	// and collectives that involve it fail with it.
	ErrPeerLost = core.ErrPeerLost
	// ErrAborted: the job was given up (another rank failed, Abort).
	ErrAborted = core.ErrAborted
	// ErrCanceled: a receive cancelled before it matched.
	ErrCanceled = core.ErrCanceled
	// ErrMismatch: ranks called a collective with arguments that do not
	// fit together (different lengths).
	ErrMismatch = coll.ErrMismatch
	// ErrInvalid: a bad argument (a rank outside the communicator, a
	// buffer too short).
	ErrInvalid = pml.ErrInvalid
)

// collTuning turns the stack's coll block into the collective layer's
// choices.
func collTuning(p core.Params) (*coll.Tuning, error) {
	t := &coll.Tuning{}
	if p.Schema() == nil {
		return t, nil
	}
	for name := range conf.CollAlgorithms() {
		if err := t.Set(name, p.String(name)); err != nil {
			return nil, fmt.Errorf("gobtl: %w", err)
		}
	}
	if p.Has("segment") {
		t.Segment = int(p.Size("segment"))
	}
	return t, nil
}

// Coll returns the collective layer of c, for what the byte-level API of
// package coll offers beyond the methods here (its reductions over raw
// operations, say).
func (c *Comm) Coll() *coll.Comm { return c.coll }

// derived wraps a communicator Split or Dup made.
func (c *Comm) derived(cc *coll.Comm) *Comm {
	if cc == nil {
		return nil
	}
	return &Comm{Comm: cc.PML().(*pml.Comm), coll: cc}
}

// Barrier returns when every rank of c has entered it.
func (c *Comm) Barrier() error { return c.coll.Barrier(context.Background()) }

// BarrierContext is Barrier with a context.
func (c *Comm) BarrierContext(ctx context.Context) error { return c.coll.Barrier(ctx) }

// Ibarrier starts a barrier: its request completes once every rank has
// entered it.
func (c *Comm) Ibarrier() (*Request, error) { return c.coll.Ibarrier() }

// Bcast copies root's buf into every rank's buf (of the same length).
func (c *Comm) Bcast(buf []byte, root int) error {
	return c.coll.Bcast(context.Background(), buf, root)
}

// BcastContext is Bcast with a context.
func (c *Comm) BcastContext(ctx context.Context, buf []byte, root int) error {
	return c.coll.Bcast(ctx, buf, root)
}

// Ibcast starts a broadcast; buf must not be touched until its request
// completes.
func (c *Comm) Ibcast(buf []byte, root int) (*Request, error) { return c.coll.Ibcast(buf, root) }

// Gather collects every rank's send (of one length) into root's recv, in
// rank order: rank i's bytes at recv[i*len(send):]. send may be the
// root's own block of recv.
func (c *Comm) Gather(send, recv []byte, root int) error {
	return c.coll.Gather(context.Background(), send, recv, root)
}

// GatherContext is Gather with a context.
func (c *Comm) GatherContext(ctx context.Context, send, recv []byte, root int) error {
	return c.coll.Gather(ctx, send, recv, root)
}

// Gatherv collects rank i's counts[i] bytes into root's
// recv[displs[i]:]; counts and displs matter on the root.
func (c *Comm) Gatherv(send, recv []byte, counts, displs []int, root int) error {
	return c.coll.Gatherv(context.Background(), send, recv, counts, displs, root)
}

// GathervContext is Gatherv with a context.
func (c *Comm) GathervContext(ctx context.Context, send, recv []byte, counts, displs []int, root int) error {
	return c.coll.Gatherv(ctx, send, recv, counts, displs, root)
}

// Scatter sends root's send[i*len(recv):] to rank i's recv. recv may be
// the root's own block of send.
func (c *Comm) Scatter(send, recv []byte, root int) error {
	return c.coll.Scatter(context.Background(), send, recv, root)
}

// ScatterContext is Scatter with a context.
func (c *Comm) ScatterContext(ctx context.Context, send, recv []byte, root int) error {
	return c.coll.Scatter(ctx, send, recv, root)
}

// Scatterv sends root's counts[i] bytes at send[displs[i]:] to rank i's
// recv; counts and displs matter on the root.
func (c *Comm) Scatterv(send, recv []byte, counts, displs []int, root int) error {
	return c.coll.Scatterv(context.Background(), send, recv, counts, displs, root)
}

// ScattervContext is Scatterv with a context.
func (c *Comm) ScattervContext(ctx context.Context, send, recv []byte, counts, displs []int, root int) error {
	return c.coll.Scatterv(ctx, send, recv, counts, displs, root)
}

// Allgather gathers every rank's send (of one length) into every rank's
// recv, in rank order. send may be this rank's own block of recv.
func (c *Comm) Allgather(send, recv []byte) error {
	return c.coll.Allgather(context.Background(), send, recv)
}

// AllgatherContext is Allgather with a context.
func (c *Comm) AllgatherContext(ctx context.Context, send, recv []byte) error {
	return c.coll.Allgather(ctx, send, recv)
}

// Allgatherv gathers rank i's counts[i] bytes into every rank's
// recv[displs[i]:].
func (c *Comm) Allgatherv(send, recv []byte, counts, displs []int) error {
	return c.coll.Allgatherv(context.Background(), send, recv, counts, displs)
}

// AllgathervContext is Allgatherv with a context.
func (c *Comm) AllgathervContext(ctx context.Context, send, recv []byte, counts, displs []int) error {
	return c.coll.Allgatherv(ctx, send, recv, counts, displs)
}

// Alltoall sends block bytes at send[i*block:] to rank i and receives
// rank i's block into recv[i*block:]. send may be recv.
func (c *Comm) Alltoall(send, recv []byte, block int) error {
	return c.coll.Alltoall(context.Background(), send, recv, block)
}

// AlltoallContext is Alltoall with a context.
func (c *Comm) AlltoallContext(ctx context.Context, send, recv []byte, block int) error {
	return c.coll.Alltoall(ctx, send, recv, block)
}

// Alltoallv sends sendCounts[i] bytes at send[sendDispls[i]:] to rank i
// and receives recvCounts[i] bytes from rank i into
// recv[recvDispls[i]:].
func (c *Comm) Alltoallv(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int) error {
	return c.coll.Alltoallv(context.Background(), send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// AlltoallvContext is Alltoallv with a context.
func (c *Comm) AlltoallvContext(ctx context.Context, send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int) error {
	return c.coll.Alltoallv(ctx, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// Sendrecv sends send to dest with sendTag and receives into recv a
// message from source (or AnySource) with recvTag (or AnyTag), both at
// once, so that ranks exchanging in a cycle do not deadlock. It returns
// the receive's status.
func (c *Comm) Sendrecv(send []byte, dest, sendTag int, recv []byte, source, recvTag int) (Status, error) {
	return c.SendrecvContext(context.Background(), send, dest, sendTag, recv, source, recvTag)
}

// SendrecvContext is Sendrecv with a context: when it ends, the receive
// is cancelled if it has not matched and the send goes on in the
// background.
func (c *Comm) SendrecvContext(ctx context.Context, send []byte, dest, sendTag int, recv []byte, source, recvTag int) (Status, error) {
	r, err := c.Irecv(recv, source, recvTag)
	if err != nil {
		return Status{}, err
	}
	s, err := c.Isend(send, dest, sendTag)
	if err != nil {
		_ = c.Cancel(r)
		_ = c.Free(r)
		return Status{}, err
	}
	rs := [2]*Request{r, s}
	var sts [2]Status
	err = c.WaitallContext(ctx, rs[:], sts[:])
	if ctx.Err() != nil && err == ctx.Err() {
		if rs[0] != nil {
			_ = c.Cancel(rs[0])
		}
		for _, q := range rs {
			if q != nil {
				_ = c.Free(q)
			}
		}
		return Status{}, err
	}
	return sts[0], err
}

// Split partitions c's ranks by color: the ranks with one color form a
// new communicator, ranked by key (ties by their rank in c), as
// MPI_Comm_split does. A rank whose color is Undefined gets nil. Every
// rank of c calls it.
func (c *Comm) Split(color, key int) (*Comm, error) {
	return c.SplitContext(context.Background(), color, key)
}

// SplitContext is Split with a context.
func (c *Comm) SplitContext(ctx context.Context, color, key int) (*Comm, error) {
	cc, err := c.coll.Split(ctx, color, key)
	if err != nil {
		return nil, err
	}
	return c.derived(cc), nil
}

// Dup returns a communicator over c's ranks whose messages never match
// c's. Every rank of c calls it.
func (c *Comm) Dup() (*Comm, error) { return c.DupContext(context.Background()) }

// DupContext is Dup with a context.
func (c *Comm) DupContext(ctx context.Context) (*Comm, error) {
	cc, err := c.coll.Dup(ctx)
	if err != nil {
		return nil, err
	}
	return c.derived(cc), nil
}
