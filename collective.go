package gobtl

import (
	"context"
	"fmt"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// The collectives of a Comm over bytes, from package coll; their typed
// forms and the non-blocking ones are the generic functions of typed.go
// and reduce.go. Every rank of the communicator calls each collective, in
// the same order, with arguments that fit together (ErrMismatch when the
// lengths do not). A blocking call returns when this rank's part is done
// — its buffers are then the caller's again — which says nothing of the
// other ranks' (but for Barrier). It fails with ErrPeerLost when a member
// of the communicator is lost (any member: a rank waiting on a live one
// that lost another would wait for ever), and with ErrInvalid for
// arguments that are wrong on this rank alone (a root outside the
// communicator, a buffer too short).
//
// Every blocking call has a form that takes a context first. When the
// context ends before the collective is done on this rank, it returns a
// *PendingError wrapping ctx.Err(): the collective cannot stop half-way —
// the other ranks are in it too — so it goes on in the background as the
// error's Request, and the buffers are in use until that request
// completes (Wait for it, or Free it and give them up).

// Undefined is the color of a rank that joins no communicator in Split.
const Undefined = coll.Undefined

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

// derived wraps a communicator Split or Dup made.
func (c *Comm) derived(cc *coll.Comm) *Comm {
	if cc == nil {
		return nil
	}
	return &Comm{p: cc.PML().(*pml.Comm), coll: cc}
}

// Barrier returns when every rank of c has entered it.
func (c *Comm) Barrier() error { return c.coll.Barrier(context.Background()) }

// BarrierContext is Barrier with a context. A context that ends first
// makes it return a *PendingError, whose request completes with the
// barrier.
func (c *Comm) BarrierContext(ctx context.Context) error { return c.coll.Barrier(ctx) }

// Bcast copies root's buf into every rank's buf (of the same length).
func (c *Comm) Bcast(buf []byte, root int) error {
	return c.coll.Bcast(context.Background(), buf, root)
}

// BcastContext is Bcast with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func (c *Comm) BcastContext(ctx context.Context, buf []byte, root int) error {
	return c.coll.Bcast(ctx, buf, root)
}

// Gather collects every rank's send (of one length) into root's recv, in
// rank order: rank i's bytes at recv[i*len(send):]. send may be the
// root's own block of recv.
func (c *Comm) Gather(send, recv []byte, root int) error {
	return c.coll.Gather(context.Background(), send, recv, root)
}

// GatherContext is Gather with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func (c *Comm) GatherContext(ctx context.Context, send, recv []byte, root int) error {
	return c.coll.Gather(ctx, send, recv, root)
}

// Gatherv collects rank i's counts[i] bytes into root's
// recv[displs[i]:]; counts and displs matter on the root.
func (c *Comm) Gatherv(send, recv []byte, counts, displs []int, root int) error {
	return c.coll.Gatherv(context.Background(), send, recv, counts, displs, root)
}

// GathervContext is Gatherv with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func (c *Comm) GathervContext(ctx context.Context, send, recv []byte, counts, displs []int, root int) error {
	return c.coll.Gatherv(ctx, send, recv, counts, displs, root)
}

// Scatter sends root's send[i*len(recv):] to rank i's recv. recv may be
// the root's own block of send.
func (c *Comm) Scatter(send, recv []byte, root int) error {
	return c.coll.Scatter(context.Background(), send, recv, root)
}

// ScatterContext is Scatter with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func (c *Comm) ScatterContext(ctx context.Context, send, recv []byte, root int) error {
	return c.coll.Scatter(ctx, send, recv, root)
}

// Scatterv sends root's counts[i] bytes at send[displs[i]:] to rank i's
// recv; counts and displs matter on the root.
func (c *Comm) Scatterv(send, recv []byte, counts, displs []int, root int) error {
	return c.coll.Scatterv(context.Background(), send, recv, counts, displs, root)
}

// ScattervContext is Scatterv with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func (c *Comm) ScattervContext(ctx context.Context, send, recv []byte, counts, displs []int, root int) error {
	return c.coll.Scatterv(ctx, send, recv, counts, displs, root)
}

// Allgather gathers every rank's send (of one length) into every rank's
// recv, in rank order. send may be this rank's own block of recv.
func (c *Comm) Allgather(send, recv []byte) error {
	return c.coll.Allgather(context.Background(), send, recv)
}

// AllgatherContext is Allgather with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func (c *Comm) AllgatherContext(ctx context.Context, send, recv []byte) error {
	return c.coll.Allgather(ctx, send, recv)
}

// Allgatherv gathers rank i's counts[i] bytes into every rank's
// recv[displs[i]:].
func (c *Comm) Allgatherv(send, recv []byte, counts, displs []int) error {
	return c.coll.Allgatherv(context.Background(), send, recv, counts, displs)
}

// AllgathervContext is Allgatherv with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func (c *Comm) AllgathervContext(ctx context.Context, send, recv []byte, counts, displs []int) error {
	return c.coll.Allgatherv(ctx, send, recv, counts, displs)
}

// Alltoall sends block bytes at send[i*block:] to rank i and receives
// rank i's block into recv[i*block:]. send may be recv.
func (c *Comm) Alltoall(send, recv []byte, block int) error {
	return c.coll.Alltoall(context.Background(), send, recv, block)
}

// AlltoallContext is Alltoall with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
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
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func (c *Comm) AlltoallvContext(ctx context.Context, send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int) error {
	return c.coll.Alltoallv(ctx, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// Split partitions c's ranks by color: the ranks with one color form a
// new communicator, ranked by key (ties by their rank in c), as
// MPI_Comm_split does. A rank whose color is Undefined gets nil. Every
// rank of c calls it. The new communicator's messages never match c's;
// closing it is not needed (closing the communicator of Init ends it).
func (c *Comm) Split(color, key int) (*Comm, error) {
	return c.SplitContext(context.Background(), color, key)
}

// SplitContext is Split with a context. If it ends first, SplitContext
// returns its error and no communicator: the exchange goes on in the
// background, on buffers of its own, and the ranks that completed it hold
// a communicator this rank is not part of — give up on them (Abort).
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

// DupContext is Dup with a context; one that ends first is as for
// SplitContext.
func (c *Comm) DupContext(ctx context.Context) (*Comm, error) {
	cc, err := c.coll.Dup(ctx)
	if err != nil {
		return nil, err
	}
	return c.derived(cc), nil
}
