package pml

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
)

// Comm is a communicator: every rank of the job, and a context that
// isolates its messages from those of other communicators. Its methods are
// safe for concurrent use; they serialise on one engine lock, which costs no
// locked instruction while one goroutine drives the engine and becomes a
// mutex for good once a second goroutine calls in (engineLock).
type Comm struct {
	e     *engine
	ctx   uint32 // point-to-point context; ctx+1 carries collectives
	owner bool   // closes the modules
	// g is the communicator's ranks when they are not the whole job
	// (Derive); rank and size are this rank's place in it and its size.
	g          *group
	rank, size int
	coll       *Comm // c on its collective context (Collectives)
	// cx is ctx's matching state, looked up once: contexts are never
	// replaced (matcher.context).
	cx *matchContext
	// sent is the request every eager Isend on c that left at once
	// returns while its status fits (sharedSend): one shared, done request
	// instead of one taken, set, released and recycled per message.
	sent *Request
}

// ErrInvalid reports a bad argument (rank out of range, negative tag).
var ErrInvalid = errors.New("invalid argument")

// Rank is this process's rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// Metrics returns the registry the engine and its modules count into.
// The engine's per-message counters are published to it here, at every
// 64th poll and at Close.
func (c *Comm) Metrics() *core.Metrics {
	c.e.mu.Lock()
	c.e.flushMetrics()
	c.e.mu.Unlock()
	return c.e.opts.Metrics
}

// check validates the peer rank and tag of a call; wild admits AnySource
// and AnyTag (receives and probes).
func (c *Comm) check(rank, tag int, wild bool) error {
	if uint(rank) < uint(c.size) && uint(tag) < 1<<31 {
		return nil // inlined: a call without wildcards pays two compares
	}
	return c.checkSlow(rank, tag, wild)
}

// checkSlow is check for wildcards and bad arguments.
func (c *Comm) checkSlow(rank, tag int, wild bool) error {
	if !(rank >= 0 && rank < c.size || wild && rank == AnySource) {
		return fmt.Errorf("pml: rank %d outside a communicator of %d: %w", rank, c.size, ErrInvalid)
	}
	if !(tag >= 0 && tag <= 1<<31-1 || wild && tag == AnyTag) {
		return fmt.Errorf("pml: tag %d: tags are 0..2^31-1: %w", tag, ErrInvalid)
	}
	return nil
}

// Isend starts sending buf to dest with tag. buf must not change until the
// request completes.
//
// Isend and Irecv each take the lock themselves rather than through one
// function for both: what is kept across the lock's call (the arguments,
// spilled to the stack) is then only what the call needs.
func (c *Comm) Isend(buf []byte, dest, tag int) (*Request, error) {
	return c.isend(buf, dest, tag, false)
}

// IsendExchange is Isend for one half of an exchange: dest sends a
// message to this rank at the same time and each waits for the other's,
// as in a collective's recursive halving or doubling step. A transport
// may move such messages otherwise than one-way ones (core.Attrs'
// MechExchange): shared memory with more ranks than cores takes its copy
// pipeline, which needs both processes running, for exchanges only.
func (c *Comm) IsendExchange(buf []byte, dest, tag int) (*Request, error) {
	return c.isend(buf, dest, tag, true)
}

// isend is Isend, an exchange's if exchange.
func (c *Comm) isend(buf []byte, dest, tag int, exchange bool) (*Request, error) {
	if err := c.check(dest, tag, false); err != nil {
		return nil, err
	}
	e := c.e
	e.mu.Lock()
	w := c.g.toWorld(dest)
	if e.sendDirect(c.ctx, buf, w, tag) {
		// c's shared done send (sharedSend), written out here: as a
		// function it does not inline.
		r := c.sent
		if r.holders != 0 && (r.status.Tag != tag || r.status.Count != len(buf)) {
			r = c.ownSend(w, tag, len(buf))
		} else {
			r.status.Tag, r.status.Count = tag, len(buf)
			r.holders++
			r.released = false
		}
		e.mu.Unlock()
		return r, nil
	}
	r, err := e.isend(c.g, c.ctx, buf, w, tag, exchange)
	e.mu.Unlock()
	return r, err
}

// isend starts a send to job rank dest on a communicator of group g by
// the general path, the fused one (sendDirect) having declined it (lock
// held); exchange: dest sends to this rank at the same time.
func (e *engine) isend(g *group, ctx uint32, buf []byte, dest, tag int, exchange bool) (*Request, error) {
	if e.closed {
		return nil, fmt.Errorf("pml: send: %w", core.ErrClosed)
	}
	p := e.chans.get(dest)
	if len(p.subchannels()) == 0 && p.failed() == nil {
		return nil, fmt.Errorf("pml: no module reaches rank %d: %w", dest, core.ErrUnreachable)
	}
	r := e.newRequest(reqSend, ctx, g, dest, tag, buf)
	r.status = Status{Source: g.toLocal(e.rank), Tag: tag, Count: len(buf)}
	if p.failed() != nil {
		e.complete(r, p.failed())
		return r, nil
	}
	s := p.pickSmall()
	if len(buf) <= s.eager && (s.credited == nil || !s.credited.PreferRendezvous()) {
		h := core.Header{Type: core.TypeEager, Context: ctx, Tag: int32(tag), PSN: p.nextPSN()}
		p.tookPSN()
		e.hot.eagerSends++
		e.hot.bytesSent += int64(len(buf))
		e.sendFrame(p, s, h, nil, buf, 0, r)
		return r, nil
	}
	r.exchange = exchange
	e.rndv.begin(r, p, s)
	return r, nil
}

// sendNow sends buf to job rank dest as one eager frame without a
// request, for a blocking Send (Open MPI's sendi): when the frame leaves
// at once the Send is over, and a request would only be made, completed
// and recycled. It reports false, having sent nothing, when the message
// needs a request — too long, no credit, frames already waiting on the
// subchannel, no room in the module — and isend takes over; and true
// with an error when the peer failed (lock held).
func (e *engine) sendNow(ctx uint32, buf []byte, dest, tag int) (bool, error) {
	if e.sendDirect(ctx, buf, dest, tag) {
		return true, nil
	}
	p := e.chans.get(dest)
	if e.closed || len(p.subchannels()) == 0 || p.failed() != nil {
		return false, nil
	}
	s := p.pickSmall()
	if len(buf) > s.eager || !s.out.Empty() || s.credited != nil && s.credited.PreferRendezvous() {
		return false, nil
	}
	s.mod.armed = true
	err := s.ep.Send(core.Header{Type: core.TypeEager, Src: int32(e.rank), Context: ctx, Tag: int32(tag), PSN: p.nextPSN()}, nil, buf, 0)
	if errors.Is(err, core.ErrNoResources) {
		return false, nil
	}
	if err != nil {
		e.failPeer(p, err)
		return true, p.failed()
	}
	p.tookPSN()
	e.hot.eagerSends++
	e.hot.bytesSent += int64(len(buf))
	return true, nil
}

// TrySend sends buf to dest with tag at once, with no request, when it
// can go whole as one eager frame that leaves now (Open MPI's sendi): the
// path of a blocking Send that needs no wait. It reports false, having
// sent nothing, when the message needs a request — too long, no credit,
// frames already waiting — and Isend must take it; true with an error
// when the peer is lost. A collective sends the small messages of its
// rounds so: a request would only be made, found done and recycled.
func (c *Comm) TrySend(buf []byte, dest, tag int) (bool, error) {
	if err := c.check(dest, tag, false); err != nil {
		return true, err
	}
	e := c.e
	e.mu.Lock()
	sent, err := e.sendNow(c.ctx, buf, c.g.toWorld(dest), tag)
	e.mu.Unlock()
	return sent, err
}

// Irecv starts receiving into buf a message from source (or AnySource)
// with tag (or AnyTag).
func (c *Comm) Irecv(buf []byte, source, tag int) (*Request, error) {
	if err := c.check(source, tag, true); err != nil {
		return nil, err
	}
	e := c.e
	e.mu.Lock()
	w, cx := c.g.toWorld(source), c.cx
	if w >= 0 && cx.postsBehind() && !e.closed && e.async == nil && e.lostErr(w) == nil {
		// irecv's common case in a window, written out here to save
		// its call: behind a receive posted earlier (so not the fused
		// path's), with nothing kept as unexpected, from a live peer.
		r := e.newRequest(reqRecv, c.ctx, c.g, w, tag, buf)
		r.src = -1
		e.pendingRecvs++
		cx.post(r)
		e.mu.Unlock()
		return r, nil
	}
	r, err := e.irecv(c, buf, w, tag)
	e.mu.Unlock()
	return r, err
}

// irecv posts a receive from job rank source (or AnySource) on c (lock
// held).
func (e *engine) irecv(c *Comm, buf []byte, source, tag int) (*Request, error) {
	if e.closed {
		return nil, fmt.Errorf("pml: receive: %w", core.ErrClosed)
	}
	g := c.g
	r := e.newRequest(reqRecv, c.ctx, g, source, tag, buf)
	r.src = -1
	e.pendingRecvs++
	cx := c.cx
	if source == AnySource {
		// ULFM: a wildcard could be waiting for the lost peer, so until
		// the loss is acknowledged it fails, even if a message of a live
		// peer would match — the caller learns of the loss first.
		if err := e.unacked(cx, g); err != nil {
			e.complete(r, err)
			return r, nil
		}
	}
	if u := cx.takeUnexpected(source, tag); u != nil {
		e.recvUnexpected(r, u)
		return r, nil
	}
	if source != AnySource {
		if err := e.lostErr(source); err != nil {
			e.complete(r, err)
			return r, nil
		}
		if !cx.hasPosted() && e.irecvFast(r) {
			return r, nil
		}
	}
	cx.post(r)
	if e.async != nil {
		e.async.arm()
	}
	return r, nil
}

// Send sends buf to dest and returns when buf may be reused.
func (c *Comm) Send(buf []byte, dest, tag int) error {
	if err := c.check(dest, tag, false); err != nil {
		return err
	}
	e := c.e
	e.mu.Lock()
	if sent, err := e.sendNow(c.ctx, buf, c.g.toWorld(dest), tag); sent {
		e.mu.Unlock()
		return err
	}
	r, err := e.isend(c.g, c.ctx, buf, c.g.toWorld(dest), tag, false)
	if err == nil && r.done { // an eager send is done at once: one lock
		err = r.status.Err
		e.release(r)
		e.mu.Unlock()
		return err
	}
	e.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = c.Wait(r)
	return err
}

// Recv receives a message into buf.
func (c *Comm) Recv(buf []byte, source, tag int) (Status, error) {
	if err := c.check(source, tag, true); err != nil {
		return Status{}, err
	}
	e := c.e
	spun := 0
	if source != AnySource {
		st, n, ok := c.recvDirect(buf, c.g.toWorld(source), tag)
		if ok {
			return st, nil
		}
		spun = n
	}
	e.mu.Lock()
	r, err := e.irecv(c, buf, c.g.toWorld(source), tag)
	if err == nil && !r.done {
		e.progress()
	}
	if err == nil && r.done {
		st := r.status
		e.release(r)
		e.mu.Unlock()
		return st, st.Err
	}
	e.mu.Unlock()
	if err != nil {
		return Status{}, err
	}
	st, err, _ := c.waitSpun(context.Background(), r, 0, spun)
	return st, err
}

// Cancel cancels a posted receive that has not matched yet; it then
// completes with core.ErrCanceled. Canceling a matched or completed
// receive does nothing; sends cannot be canceled.
func (c *Comm) Cancel(r *Request) error {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if r == nil || r.e != e || r.released {
		return fmt.Errorf("pml: cancel of a released, foreign or nil request: %w", ErrInvalid)
	}
	if r.kind == reqSend {
		return fmt.Errorf("pml: cancel of a send: %w", core.ErrNotSupported)
	}
	if r.posted() {
		e.match.context(r.ctx).unpost(r)
		e.complete(r, fmt.Errorf("pml: receive from %d tag %d: %w", r.peer, r.tag, core.ErrCanceled))
	}
	return nil
}

// Dup returns a communicator over the same ranks with its own context, so
// its messages never match those of c. Like MPI_Comm_dup it is collective:
// every rank must call Dup in the same order. It takes the next id of a
// counter every rank keeps alike as long as every communicator is made by
// Dup; once some ranks have made communicators the others have not
// (Derive), ids are agreed instead (package coll's Dup and Split).
func (c *Comm) Dup() (*Comm, error) {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("pml: dup: %w", core.ErrClosed)
	}
	ctx, err := e.match.dup()
	if err != nil {
		return nil, err
	}
	return e.newComm(ctx, c.g, c.rank, c.size), nil
}

// Abort gives up on the job for this rank, as a launcher does when
// another rank dies: every blocking call in progress (from any goroutine)
// and every one to come returns an error wrapping core.ErrAborted and
// cause, and Close skips the collective finalize, closing at once. It is
// safe to call from any goroutine, and more than once (the first cause
// stays).
func (c *Comm) Abort(cause error) {
	err := fmt.Errorf("pml: %w", errors.Join(core.ErrAborted, cause))
	c.e.abort.CompareAndSwap(nil, &err)
}

// Aborted returns the cause Abort was given (wrapping core.ErrAborted),
// or nil while the job has not been aborted.
func (c *Comm) Aborted() error { return c.e.aborted() }

// Close releases the communicator. Closing the communicator New returned
// finalizes the job for this rank, like MPI_Finalize: it is collective.
// It sends what this rank still owes its peers (a FIN queued behind a
// full ring, say), waits until every rank has done the same — bounded by
// Options.FinalizeTimeout — and then stops the progress thread and closes
// the modules. Duplicates become unusable.
func (c *Comm) Close() error {
	if !c.owner {
		return nil
	}
	e := c.e
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	var errs []error
	if e.aborted() == nil {
		errs = append(errs, c.finalize()) // an aborted job has no one to meet
	}
	e.mu.Lock()
	e.closed, e.unfused = true, true
	e.flushMetrics()
	a := e.async
	e.mu.Unlock()
	if a != nil {
		a.close()
	}
	for _, m := range e.mods {
		if err := m.m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("pml: close %s: %w", m.attrs.Name, err))
		}
	}
	return errors.Join(errs...)
}

// finalize flushes owed work and meets the other ranks in a barrier,
// within Options.FinalizeTimeout — or FailedFinalize once this rank has
// failed (lost.go): its peers may be blocked on it, and never come.
func (c *Comm) finalize() error {
	e := c.e
	bound := e.opts.FinalizeTimeout
	if f := e.failed.Load(); f != nil {
		bound = min(bound, FailedFinalize)
	}
	deadline := e.opts.Clock.Now() + bound
	if err := c.flush(deadline, bound); err != nil {
		return err
	}
	if e.size == 1 || e.chans.anyLost() {
		return nil // a barrier with a lost peer cannot complete
	}
	if err := c.barrier(deadline); err != nil {
		if errors.Is(err, core.ErrPeerLost) {
			return nil
		}
		if f := e.failed.Load(); f != nil && bound < e.opts.FinalizeTimeout {
			return fmt.Errorf("pml: finalize: the other ranks did not all close within %v of this rank's failure (%v): %w", bound, *f, err)
		}
		return fmt.Errorf("pml: finalize: the other ranks did not all close within %v: %w", bound, err)
	}
	return c.flush(deadline, bound)
}

// flush makes progress until no frame or RDMA operation waits for
// resources, or fails at deadline (bound after it started).
func (c *Comm) flush(deadline, bound time.Duration) error {
	e := c.e
	b := e.newBackoff()
	for {
		e.mu.Lock()
		n := e.progress()
		idle := e.pendingWork == 0
		e.mu.Unlock()
		if idle {
			return nil
		}
		if n > 0 {
			b.reset()
		} else if err := e.aborted(); err != nil {
			return err
		} else if e.opts.Clock.Now() > deadline {
			return fmt.Errorf("pml: finalize: work still queued after %v: %w", bound, core.ErrStalled)
		}
		b.wait()
	}
}
