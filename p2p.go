package gobtl

import (
	"context"

	"github.com/gobtl/gobtl/core"
)

// Point-to-point (see the package doc). Each method is one call of the
// PML's communicator, inlined: these wrappers add nothing to the path of a
// message.

// Rank is this rank's number in c, from 0 to Size()−1.
func (c *Comm) Rank() int { return c.p.Rank() }

// Size is the number of ranks in c.
func (c *Comm) Size() int { return c.p.Size() }

// Send sends buf to rank dest of c with tag (0 to 2³¹−1) and blocks until
// buf may be reused — the message has left this rank's hands, which does
// not mean dest has received it (MPI_Send's standard mode). A message up
// to the transport's eager limit (a few KiB) is copied out and Send
// returns at once, whether or not dest has posted its receive; a longer
// one goes by rendezvous, and Send returns once dest has matched it with a
// receive and the bytes have moved. Two ranks that Send long messages to
// each other before either receives therefore wait for ever: use Sendrecv,
// or Isend and Irecv.
//
// Send fails with ErrUnreachable when no transport of the stack reaches
// dest, with ErrPeerLost when dest, or the connection to it, is gone
// (whatever the message's state then), and as every call may (ErrInvalid,
// ErrClosed, ErrAborted, ErrStalled: see Errors in the package doc). A
// send cannot be cancelled.
func (c *Comm) Send(buf []byte, dest, tag int) error { return c.p.Send(buf, dest, tag) }

// SendContext is Send that returns ctx.Err() if ctx ends first. A send
// cannot be taken back: it then goes on in the background, and buf must
// not change until dest has it, which nothing tells; a caller that must
// know calls Isend and WaitContext, which keeps the request.
func (c *Comm) SendContext(ctx context.Context, buf []byte, dest, tag int) error {
	return c.p.SendContext(ctx, buf, dest, tag)
}

// Recv blocks until a message from rank source of c (or AnySource) with
// tag (or AnyTag) has been received into buf, and returns its Status: the
// Source and Tag it came with and Count, the bytes received. A message
// shorter than buf leaves the rest of buf as it was; a longer one fills
// buf and fails with ErrTruncated (Status.Count is then len(buf); the
// sender is unaffected). When Recv returns, buf is the caller's again.
//
// Recv fails with ErrPeerLost when source, or the connection to it, is
// gone — with AnySource, when any member of c is lost and not yet
// acknowledged (AckFailed), since the receive might be waiting for it —
// and as every call may (ErrInvalid, ErrClosed, ErrAborted, ErrStalled).
func (c *Comm) Recv(buf []byte, source, tag int) (Status, error) { return c.p.Recv(buf, source, tag) }

// RecvContext is Recv that returns ctx.Err() if ctx ends first. The
// receive is then cancelled if no message has matched it yet, and buf is
// the caller's again; one that has matched goes on in the background,
// filling buf, which nothing tells — a caller that must know calls Irecv
// and WaitContext, which keeps the request.
func (c *Comm) RecvContext(ctx context.Context, buf []byte, source, tag int) (Status, error) {
	return c.p.RecvContext(ctx, buf, source, tag)
}

// Isend starts sending buf to rank dest with tag and returns at once with
// a request that completes when buf may be reused (as for Send). buf must
// not change until then. The request must be completed (Wait, Test, ...)
// or freed (Free). An eager send that left at once may return a request
// shared with other such sends; each handle is still completed once.
func (c *Comm) Isend(buf []byte, dest, tag int) (*Request, error) { return c.p.Isend(buf, dest, tag) }

// Irecv starts receiving into buf a message from source (or AnySource)
// with tag (or AnyTag) and returns at once with a request that completes
// when the message is in buf (its Status as Recv's). buf must not be
// read or written until then. A receive that has not matched can be
// cancelled (Cancel).
func (c *Comm) Irecv(buf []byte, source, tag int) (*Request, error) {
	return c.p.Irecv(buf, source, tag)
}

// Probe blocks until a message from source (or AnySource) with tag (or
// AnyTag) could be received, and returns its Status without receiving it:
// Count is the message's full length, to size the buffer of the Recv that
// follows (which should name the Source and Tag the status gives).
func (c *Comm) Probe(source, tag int) (Status, error) { return c.p.Probe(source, tag) }

// ProbeContext is Probe that returns ctx.Err() if ctx ends first.
func (c *Comm) ProbeContext(ctx context.Context, source, tag int) (Status, error) {
	return c.p.ProbeContext(ctx, source, tag)
}

// Iprobe reports whether a message from source with tag could be received
// now, with its Status as Probe's, without blocking.
func (c *Comm) Iprobe(source, tag int) (bool, Status, error) { return c.p.Iprobe(source, tag) }

// Sendrecv sends send to dest with sendTag and receives into recv a
// message from source (or AnySource) with recvTag (or AnyTag), both at
// once, so that ranks exchanging in a cycle do not deadlock. It returns
// the receive's status.
func (c *Comm) Sendrecv(send []byte, dest, sendTag int, recv []byte, source, recvTag int) (Status, error) {
	return c.SendrecvContext(context.Background(), send, dest, sendTag, recv, source, recvTag)
}

// SendrecvContext is Sendrecv with a context: when it ends, the receive
// is cancelled if it has not matched and the send goes on in the
// background (as for SendContext and RecvContext).
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

// The Wait/Test family completes requests of any kind — sends, receives,
// non-blocking collectives — of any communicator of the job. A request
// that completes is released: its buffer is the caller's again and the
// request must not be used again. Every call of the family also advances
// the job's non-blocking collectives and the messages of every peer, so a
// program that computes between calls keeps its requests moving by
// testing them. A context that ends makes the call return ctx.Err() and
// leaves every request it had not completed pending and valid, to be
// waited for again, tested, cancelled or freed; so do ErrAborted and
// ErrStalled.

// Wait blocks until r completes, releases it and returns its Status. The
// error is the Status's Err — ErrTruncated, ErrPeerLost, ErrCanceled, a
// collective's ErrMismatch — or ErrInvalid for a nil, released or foreign
// request, or ErrAborted or ErrStalled, which leave r pending. Once r has
// completed, its buffers are the caller's again; for a collective that
// failed, see PendingError on messages it may still have in flight.
func (c *Comm) Wait(r *Request) (Status, error) { return c.p.Wait(r) }

// WaitContext is Wait that returns ctx.Err() if ctx ends first; r then
// stays pending, its buffers in use.
func (c *Comm) WaitContext(ctx context.Context, r *Request) (Status, error) {
	return c.p.WaitContext(ctx, r)
}

// Test makes progress once, without blocking, and reports whether r has
// completed; if so it releases r and returns its Status, as Wait does.
func (c *Comm) Test(r *Request) (bool, Status, error) { return c.p.Test(r) }

// Waitall waits for every non-nil request of rs, releasing each and
// setting its entry to nil. When sts is not nil (it must then be as long
// as rs), sts[i] receives request i's status, its error included; nil
// entries leave theirs as they were. It returns the first error of any
// request.
func (c *Comm) Waitall(rs []*Request, sts []Status) error { return c.p.Waitall(rs, sts) }

// WaitallContext is Waitall that returns ctx.Err() if ctx ends first: the
// requests that completed are released and nil, with their statuses in
// sts; the others stay pending in rs.
func (c *Comm) WaitallContext(ctx context.Context, rs []*Request, sts []Status) error {
	return c.p.WaitallContext(ctx, rs, sts)
}

// Testall makes progress once and reports whether every non-nil request
// of rs has completed. If they have, it releases them all, sets their
// entries to nil, fills sts (when not nil, as long as rs) and returns the
// first error; if not, it releases none.
func (c *Comm) Testall(rs []*Request, sts []Status) (bool, error) { return c.p.Testall(rs, sts) }

// Waitany waits until one of the non-nil requests of rs completes,
// releases it, sets its entry to nil and returns its index and status.
// With no non-nil request it returns -1.
func (c *Comm) Waitany(rs []*Request) (int, Status, error) { return c.p.Waitany(rs) }

// WaitanyContext is Waitany that returns -1 and ctx.Err() if ctx ends
// first, every request still pending.
func (c *Comm) WaitanyContext(ctx context.Context, rs []*Request) (int, Status, error) {
	return c.p.WaitanyContext(ctx, rs)
}

// Testany makes progress once and, if one of the non-nil requests of rs
// has completed, releases it, sets its entry to nil and returns its index
// and status with ok true. With none completed it returns -1 and false;
// with no non-nil request at all, -1 and true.
func (c *Comm) Testany(rs []*Request) (idx int, ok bool, st Status, err error) {
	return c.p.Testany(rs)
}

// Waitsome waits until at least one of the non-nil requests of rs
// completes, then releases every one that has: it stores their indices in
// idx and, when sts is not nil, their statuses in sts (both as long as
// rs), sets their entries to nil and returns how many, with the first
// error among them. With no non-nil request it returns 0.
func (c *Comm) Waitsome(rs []*Request, idx []int, sts []Status) (int, error) {
	return c.p.Waitsome(rs, idx, sts)
}

// WaitsomeContext is Waitsome that returns 0 and ctx.Err() if ctx ends
// first, every request still pending.
func (c *Comm) WaitsomeContext(ctx context.Context, rs []*Request, idx []int, sts []Status) (int, error) {
	return c.p.WaitsomeContext(ctx, rs, idx, sts)
}

// Cancel cancels a receive that has not matched a message yet: it then
// completes with ErrCanceled, to be waited for or tested as any, and its
// buffer is untouched. Cancelling a receive that has matched, or
// completed, does nothing, as does cancelling a collective's request;
// sends cannot be cancelled (ErrNotSupported).
func (c *Comm) Cancel(r *Request) error { return c.p.Cancel(r) }

// Free releases r without waiting for it, as MPI_Request_free does: its
// operation goes on, and the request is recycled once it completes. Its
// buffers stay in use until then, with nothing to tell when, and r must
// not be used again.
func (c *Comm) Free(r *Request) error { return c.p.Free(r) }

// AckFailed acknowledges the members of c found lost so far and returns
// them (ranks of c), in the order they were lost (ULFM's
// MPI_Comm_failure_ack and MPI_Comm_failure_get_acked). While a lost
// member is unacknowledged, receives and probes from AnySource on c fail
// with ErrPeerLost — they might be waiting for it; once acknowledged,
// they match the live members. Receives naming a lost member always fail.
// Each communicator (Dup, Split) acknowledges for itself.
func (c *Comm) AckFailed() []int { return c.p.AckFailed() }

// Metrics returns the registry every component of the job counts into:
// the PML's per-message counters (pml.*), the collectives' calls by
// algorithm (coll.*), each transport's and policy's own.
func (c *Comm) Metrics() *core.Metrics { return c.p.Metrics() }
