package pml

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
)

// The completion family: Wait, Test and their any/all/some forms, each
// blocking one with a form that takes a context. A context that ends
// makes the call return ctx.Err() and leaves every request it had not
// completed pending and valid, to be waited for again, tested, cancelled
// or freed. Every call here also advances the operations of the layers
// above (Start), so that a non-blocking collective progresses whatever
// request the program waits on.

// Progress polls every module once, advances the operations started with
// Start, and returns how many events it handled.
func (c *Comm) Progress() int {
	n, _ := c.e.runOps()
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return n + c.e.progress()
}

// Wait blocks until r completes, then releases it.
func (c *Comm) Wait(r *Request) (Status, error) {
	st, err, _ := c.waitSpun(context.Background(), r, 0, 0)
	return st, err
}

// WaitContext is Wait that returns ctx.Err() if ctx ends first; r then
// stays pending.
func (c *Comm) WaitContext(ctx context.Context, r *Request) (Status, error) {
	st, err, _ := c.wait(ctx, r, 0)
	return st, err
}

// wait is Wait with a context and an optional deadline on the engine's
// clock; at the deadline it returns an error wrapping core.ErrStalled
// and leaves r pending. released says whether r completed (and is gone).
func (c *Comm) wait(ctx context.Context, r *Request, deadline time.Duration) (st Status, err error, released bool) {
	return c.waitSpun(ctx, r, deadline, 0)
}

// waitSpun is wait for a caller that has already polled spun times (the
// fused receive path): the back-off counts those rounds as its own, so
// that the waiter does not spin twice as long before it yields.
func (c *Comm) waitSpun(ctx context.Context, r *Request, deadline time.Duration, spun int) (st Status, err error, released bool) {
	return c.waitLive(ctx, r, deadline, spun, nil)
}

// waitLive is waitSpun for the wait of a collective's round (round not
// nil): it also gives up — r pending — once a member of c is lost
// (Lost), or when round, a Stuck, says the round will never complete.
func (c *Comm) waitLive(ctx context.Context, r *Request, deadline time.Duration, spun int, round fmt.Stringer) (st Status, err error, released bool) {
	e := c.e
	live := round != nil
	if r == nil || r.e != e {
		return Status{}, fmt.Errorf("pml: wait on a request of another communicator or nil: %w", ErrInvalid), false
	}
	if e.opts.Backoff.OwnCore {
		e.bo.keepScheduling()
	}
	done := ctx.Done()
	var b backoff // built only once the first poll has not finished r
	built := false
	seen := uint64(0) // e.events after this waiter's last poll
	for {
		e.mu.Lock()
		if r.released {
			e.mu.Unlock()
			return Status{}, fmt.Errorf("pml: wait on a released request: %w", ErrInvalid), false
		}
		// Events another goroutine handled since the last round count
		// as progress too.
		moved := built && e.events != seen
		n := 0
		if !r.done && r.posted() && r.peer != AnySource && e.direct(r.peer) {
			// A receive for one peer looks at that peer's next frame
			// first (the fused path); while it spins, that look is all
			// it polls, but for every 64th round, so that the other
			// peers and the modules' housekeeping are not kept waiting.
			k, res := e.waitFast(r)
			switch {
			case res == fastDone:
			case res == fastEmpty && (!built || b.spinning() && b.n&63 != 63):
			default:
				k += e.progress()
			}
			n = k
		} else if !r.done {
			n = e.progress()
		}
		if r.done {
			st := r.status
			e.release(r)
			e.mu.Unlock()
			return st, st.Err, true
		}
		seen = e.events
		e.mu.Unlock()
		fin, opEvents := e.runOps()
		if fin > 0 {
			continue // an operation finished: perhaps r
		}
		if !built {
			b, built = e.newBackoff(), true
			b.n = spun
		}
		if live && e.chans.anyLost() {
			if err := c.Lost(); err != nil {
				return Status{}, err, false
			}
		}
		if n > 0 || moved || opEvents {
			b.reset()
		} else if err := e.idleErr(r, &b, round, deadline); err != nil {
			return Status{}, err, false
		}
		if done != nil {
			select {
			case <-done:
				return Status{}, ctx.Err(), false
			default:
			}
		}
		b.wait()
	}
}

// idleErr is why a wait whose last round moved nothing ends, if it
// does: the job aborted, the collective round cannot complete (Stuck),
// the back-off's stall bound or the caller's deadline passed.
func (e *engine) idleErr(r *Request, b *backoff, round fmt.Stringer, deadline time.Duration) error {
	if err := e.aborted(); err != nil {
		return err
	}
	if err := stuck(round, b.n); err != nil {
		return err
	}
	if b.stalled() {
		return e.stallErr(r, 0)
	}
	if deadline > 0 && e.opts.Clock.Now() > deadline {
		return e.stallErr(r, deadline)
	}
	return nil
}

// Stuck is implemented by the operation a blocking collective's round
// waits for (WaitRound's op) when it can tell, while the round waits and
// nothing moves, that the round will never complete: its ranks called the
// collective with arguments that do not fit, and a message it waits for
// will not come (coll). The wait asks it every StuckEvery polls that
// found nothing, and WaitRound returns its error, the round's requests
// pending.
type Stuck interface {
	Stuck() error
}

// StuckEvery is how many polls that find nothing a round waits between
// two questions to its Stuck: about a millisecond once the waiter sleeps,
// off the path of a round whose messages are there.
const StuckEvery = 256

// stuck asks round, every StuckEvery idle polls (n of them so far), if it
// will never complete; the error it returns is a *stuckError. The test
// of round is inlined: a wait that is not a round's pays no call.
func stuck(round fmt.Stringer, n int) error {
	if round == nil {
		return nil
	}
	return askStuck(round, n)
}

func askStuck(round fmt.Stringer, n int) error {
	if n%StuckEvery != StuckEvery-1 {
		return nil
	}
	if s, ok := round.(Stuck); ok {
		if err := s.Stuck(); err != nil {
			return &stuckError{err}
		}
	}
	return nil
}

// stuckError carries a Stuck's error out of waitLive to WaitRound.
type stuckError struct{ err error }

func (e *stuckError) Error() string { return e.err.Error() }
func (e *stuckError) Unwrap() error { return e.err }

// stallErr is the error of a wait on r that gave up: at deadline, the
// caller's bound on the engine's clock (Close's finalize), or, when
// deadline is 0, after the stall timeout without an event. It counts as
// this rank's failure (fail): what it waited for may never come.
func (e *engine) stallErr(r *Request, deadline time.Duration) error {
	why := fmt.Sprintf("no progress for %v", e.opts.StallTimeout)
	if deadline > 0 {
		why = "not done by its deadline"
	}
	what := "send to"
	switch r.kind {
	case reqRecv:
		what = "receive from"
	case reqOp:
		return e.fail(fmt.Errorf("pml: operation: %s: %w", why, core.ErrStalled))
	}
	return e.fail(fmt.Errorf("pml: %s rank %d tag %d: %s: %w", what, r.peer, r.tag, why, core.ErrStalled))
}

// Test makes progress once and reports whether r has completed; if so it
// releases r and returns its status.
func (c *Comm) Test(r *Request) (bool, Status, error) {
	e := c.e
	e.runOps()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.usable(r, "test"); err != nil {
		return false, Status{}, err
	}
	if !r.done {
		e.progress()
	}
	if !r.done {
		return false, Status{}, nil
	}
	st := r.status
	e.release(r)
	return true, st, st.Err
}

// usable checks that r is a live request of this engine (lock held).
func (e *engine) usable(r *Request, call string) error {
	if r == nil || r.e != e || r.released {
		return fmt.Errorf("pml: %s on a released, foreign or nil request: %w", call, ErrInvalid)
	}
	return nil
}

// Waitall waits for every non-nil request, releasing each and setting its
// entry to nil. When sts is not nil (it must then be as long as rs),
// sts[i] receives request i's status, its error included; nil entries
// leave theirs as they were. It returns the first error of any request.
func (c *Comm) Waitall(rs []*Request, sts []Status) error {
	return c.WaitallContext(context.Background(), rs, sts)
}

// WaitallContext is Waitall that returns ctx.Err() if ctx ends first:
// the requests that completed are released and nil, with their statuses
// in sts; the others stay pending in rs.
func (c *Comm) WaitallContext(ctx context.Context, rs []*Request, sts []Status) error {
	return c.waitall(ctx, rs, sts, nil)
}

// WaitRound is WaitallContext for the round of a collective, which may
// wait on a member that is alive but will never send because it lost
// another: it also returns, leaving the requests that are not done
// pending, an error wrapping core.ErrPeerLost once a member of c is lost
// (Lost). A blocking collective waits its rounds with it rather than as
// an operation (Start): its receives then take the fused path, and no
// operation turns that path off for the rest of the job meanwhile.
//
// op names the collective in the state reports (State) while the round
// waits; it must not change until WaitRound returns.
func (c *Comm) WaitRound(ctx context.Context, rs []*Request, sts []Status, op fmt.Stringer) error {
	return c.waitall(ctx, rs, sts, op)
}

// waitall is WaitallContext or, with op, WaitRound: live, and op shown as
// the engine's round (lock held to set and clear it).
func (c *Comm) waitall(ctx context.Context, rs []*Request, sts []Status, op fmt.Stringer) error {
	if sts != nil && len(sts) < len(rs) {
		return fmt.Errorf("pml: waitall: %d statuses for %d requests: %w", len(sts), len(rs), ErrInvalid)
	}
	var first error
	e := c.e
	live := op != nil
	for i := 0; ; i++ {
		// Requests that are done already (a window of eager sends,
		// receives the first wait delivered) are released under one
		// lock, not one wait each.
		e.mu.Lock()
		i = e.takeDoneRun(rs, sts, i, &first)
		if i < len(rs) {
			i = e.takeFastRun(rs, sts, i)
			i = e.takeDoneRun(rs, sts, i, &first)
		}
		if live {
			if i == len(rs) {
				e.endRound(op)
			} else {
				e.round = op
			}
		}
		e.mu.Unlock()
		if i == len(rs) {
			return first
		}
		st, err, released := c.waitLive(ctx, rs[i], 0, 0, op)
		if !released {
			var gaveUp *stuckError
			if errors.As(err, &gaveUp) {
				err = gaveUp.err
			}
			if ctx.Err() != nil && err == ctx.Err() || live && (errors.Is(err, core.ErrPeerLost) || gaveUp != nil) {
				if live {
					e.mu.Lock()
					e.endRound(op)
					e.mu.Unlock()
				}
				return err
			}
			if first == nil {
				first = err
			}
			continue
		}
		rs[i] = nil
		if sts != nil {
			sts[i] = st
		}
		if err != nil && first == nil {
			first = err
		}
	}
}

// endRound clears the round that op's WaitRound set, unless another
// goroutine's round has replaced it (lock held).
func (e *engine) endRound(op fmt.Stringer) {
	if e.round == op {
		e.round = nil
	}
}

// takeDoneRun releases the requests of rs from index i on that are done,
// up to the first that is not — pending, released or of another engine —
// whose index it returns, or len(rs) (lock held). A released request's
// entry becomes nil, its status goes to sts[i] when sts is not nil, and
// its error to *first unless an earlier one is there.
func (e *engine) takeDoneRun(rs []*Request, sts []Status, i int, first *error) int {
	for ; i < len(rs); i++ {
		r := rs[i]
		if r == nil {
			continue
		}
		if r.e != e || !r.done || r.released {
			return i
		}
		rs[i] = nil
		if sts != nil {
			sts[i] = r.status
		}
		if err := r.status.Err; err != nil && *first == nil {
			*first = err
		}
		if r.refs == 0 && r.x == nil { // release's common case, without a call
			r.released = true
			e.recycle(r)
		} else if r.shared { // a window of eager sends: release's shared case
			r.holders--
			r.released = r.holders == 0
		} else {
			e.release(r)
		}
	}
	return i
}

// Testall makes progress once and reports whether every non-nil request
// has completed. If they have, it releases them all, sets their entries
// to nil, fills sts (when not nil, as long as rs) and returns the first
// error; if not, it releases none.
func (c *Comm) Testall(rs []*Request, sts []Status) (bool, error) { return c.testall(rs, sts, true) }

// Finished is Testall without its poll and without advancing the
// operations: it only looks. It is for an Op's Advance, which every wait
// and test calls beside a poll of its own (runOps): polling again there
// cost a waiting collective a second sweep of every module in every
// round of its wait. Callgrind, 4 ranks, 8 B allreduce and barrier: a
// round of the wait took about 1,750 instructions with it and 1,370
// without (runOps 1,029 → 664 a call).
func (c *Comm) Finished(rs []*Request, sts []Status) (bool, error) {
	return c.testall(rs, sts, false)
}

// testall is Testall, or Finished without poll.
func (c *Comm) testall(rs []*Request, sts []Status, poll bool) (bool, error) {
	call := "finished"
	if poll {
		call = "testall"
	}
	if sts != nil && len(sts) < len(rs) {
		return false, fmt.Errorf("pml: %s: %d statuses for %d requests: %w", call, len(sts), len(rs), ErrInvalid)
	}
	e := c.e
	if poll {
		e.runOps()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range rs {
		if r == nil {
			continue
		}
		if err := e.usable(r, call); err != nil {
			return false, err
		}
	}
	if poll {
		e.progress()
	}
	for _, r := range rs {
		if r != nil && !r.done {
			return false, nil
		}
	}
	var first error
	e.takeDoneRun(rs, sts, 0, &first) // all of them: each is done
	return true, first
}

// Testany makes progress once and, if one of the non-nil requests has
// completed, releases it, sets its entry to nil and returns its index and
// status with ok true. With none completed it returns -1 and false; with
// no non-nil request at all, -1 and true.
func (c *Comm) Testany(rs []*Request) (idx int, ok bool, st Status, err error) {
	e := c.e
	e.runOps()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.progress()
	return e.takeAny(rs, "testany")
}

// takeAny releases the first completed request of rs (lock held); see
// Testany.
func (e *engine) takeAny(rs []*Request, call string) (int, bool, Status, error) {
	live := false
	for i, r := range rs {
		if r == nil {
			continue
		}
		if err := e.usable(r, call); err != nil {
			return i, false, Status{}, err
		}
		live = true
		if r.done {
			st := r.status
			e.release(r)
			rs[i] = nil
			return i, true, st, st.Err
		}
	}
	return -1, !live, Status{}, nil
}

// Waitany waits until one of the non-nil requests completes, releases it,
// sets its entry to nil and returns its index. With no non-nil request it
// returns -1.
func (c *Comm) Waitany(rs []*Request) (int, Status, error) {
	return c.WaitanyContext(context.Background(), rs)
}

// WaitanyContext is Waitany that returns -1 and ctx.Err() if ctx ends
// first, every request still pending.
func (c *Comm) WaitanyContext(ctx context.Context, rs []*Request) (int, Status, error) {
	var (
		i  int
		st Status
	)
	err := c.poll(ctx, "waitany", func(e *engine) (bool, error) {
		var ok bool
		var err error
		i, ok, st, err = e.takeAny(rs, "waitany")
		if err != nil && !ok { // a bad request, not a failed one
			return false, err
		}
		return ok, nil
	})
	if err != nil {
		return -1, Status{}, err
	}
	return i, st, st.Err
}

// Waitsome waits until at least one of the non-nil requests completes,
// then releases every one that has: it stores their indices in idx and,
// when sts is not nil, their statuses in sts (both must be as long as rs),
// sets their entries to nil and returns how many, with the first error
// among them. With no non-nil request it returns 0.
func (c *Comm) Waitsome(rs []*Request, idx []int, sts []Status) (int, error) {
	return c.WaitsomeContext(context.Background(), rs, idx, sts)
}

// WaitsomeContext is Waitsome that returns 0 and ctx.Err() if ctx ends
// first, every request still pending.
func (c *Comm) WaitsomeContext(ctx context.Context, rs []*Request, idx []int, sts []Status) (int, error) {
	if len(idx) < len(rs) || sts != nil && len(sts) < len(rs) {
		return 0, fmt.Errorf("pml: waitsome: room for %d indices and %d statuses, %d requests: %w", len(idx), len(sts), len(rs), ErrInvalid)
	}
	n := 0
	var first error
	err := c.poll(ctx, "waitsome", func(e *engine) (bool, error) {
		live := false
		for i, r := range rs {
			if r == nil {
				continue
			}
			if err := e.usable(r, "waitsome"); err != nil {
				return false, err
			}
			live = true
			if !r.done {
				continue
			}
			st := r.status
			e.release(r)
			rs[i] = nil
			idx[n] = i
			if sts != nil {
				sts[n] = st
			}
			if st.Err != nil && first == nil {
				first = st.Err
			}
			n++
		}
		return n > 0 || !live, nil
	})
	if err != nil {
		return 0, err
	}
	return n, first
}

// poll makes progress until cond, called with the lock held after each
// round of progress, reports true or an error (a bad argument); it returns
// that error, the error of an aborted or stalled job, or ctx's.
func (c *Comm) poll(ctx context.Context, call string, cond func(e *engine) (bool, error)) error {
	e := c.e
	done := ctx.Done()
	b := e.newBackoff()
	seen, first := uint64(0), true // e.events after the last round
	for {
		_, opEvents := e.runOps()
		e.mu.Lock()
		moved := opEvents || !first && e.events != seen
		moved = e.progress() > 0 || moved
		ok, err := cond(e)
		seen, first = e.events, false
		e.mu.Unlock()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case moved:
			b.reset()
		default:
			if err := e.aborted(); err != nil {
				return err
			}
			if b.stalled() {
				return e.fail(fmt.Errorf("pml: %s: no progress for %v: %w", call, e.opts.StallTimeout, core.ErrStalled))
			}
		}
		if done != nil {
			select {
			case <-done:
				return ctx.Err()
			default:
			}
		}
		b.wait()
	}
}

// Iprobe reports whether a message from source with tag can be received,
// without receiving it. Count is the message's full length.
func (c *Comm) Iprobe(source, tag int) (bool, Status, error) {
	if err := c.check(source, tag, true); err != nil {
		return false, Status{}, err
	}
	e := c.e
	e.runOps()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.progress()
	return c.probe(source, tag)
}

// probe looks for a message from source with tag (lock held).
func (c *Comm) probe(source, tag int) (bool, Status, error) {
	e := c.e
	source = c.g.toWorld(source)
	cx := c.cx
	if source == AnySource {
		if err := e.unacked(cx, c.g); err != nil {
			return false, Status{}, err
		}
	}
	if u := cx.matchUnexpected(source, tag); u != nil {
		return true, Status{Source: c.g.toLocal(u.src), Tag: u.tag, Count: u.total}, nil
	}
	if source != AnySource {
		if err := e.lostErr(source); err != nil {
			return false, Status{}, err
		}
	}
	return false, Status{}, nil
}

// Probe blocks until a message from source with tag can be received.
func (c *Comm) Probe(source, tag int) (Status, error) {
	return c.ProbeContext(context.Background(), source, tag)
}

// ProbeContext is Probe that returns ctx.Err() if ctx ends first.
func (c *Comm) ProbeContext(ctx context.Context, source, tag int) (Status, error) {
	if err := c.check(source, tag, true); err != nil {
		return Status{}, err
	}
	var st Status
	err := c.poll(ctx, "probe", func(*engine) (bool, error) {
		ok, s, err := c.probe(source, tag)
		st = s
		return ok, err
	})
	return st, err
}

// SendContext is Send that returns ctx.Err() if ctx ends first. A send
// cannot be taken back: it then goes on in the background, and buf must
// not change until the receiver has it (Isend and WaitContext keep the
// request, for a caller that needs to know when).
func (c *Comm) SendContext(ctx context.Context, buf []byte, dest, tag int) error {
	r, err := c.Isend(buf, dest, tag)
	if err != nil {
		return err
	}
	return c.finish(ctx, r)
}

// RecvContext is Recv that returns ctx.Err() if ctx ends first. The
// receive is then cancelled if it has not matched a message yet; one that
// has goes on in the background, filling buf.
func (c *Comm) RecvContext(ctx context.Context, buf []byte, source, tag int) (Status, error) {
	r, err := c.Irecv(buf, source, tag)
	if err != nil {
		return Status{}, err
	}
	st, err, released := c.wait(ctx, r, 0)
	if !released && ctx.Err() != nil && err == ctx.Err() {
		_ = c.Cancel(r)
		_ = c.Free(r)
	}
	return st, err
}

// finish waits for r and frees it instead if ctx ends first.
func (c *Comm) finish(ctx context.Context, r *Request) error {
	_, err, released := c.wait(ctx, r, 0)
	if !released && ctx.Err() != nil && err == ctx.Err() {
		_ = c.Free(r)
	}
	return err
}

// Free releases r without waiting for it, as MPI_Request_free does: its
// operation goes on, and the request is recycled once it completes. Its
// buffer stays in use until then, and r must not be used again.
func (c *Comm) Free(r *Request) error {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.usable(r, "free"); err != nil {
		return err
	}
	e.release(r)
	return nil
}

// AckFailed acknowledges the members of c found lost so far and returns
// them (ranks of c), in the order they were lost (ULFM's
// MPI_Comm_failure_ack and MPI_Comm_failure_get_acked). While a lost
// member is unacknowledged, receives and probes from AnySource on c fail
// with core.ErrPeerLost — they might be waiting for it; once acknowledged,
// they match the live members. Receives naming a lost member always fail.
// Each communicator (Dup, Split) acknowledges for itself.
func (c *Comm) AckFailed() []int {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.progress()
	lost := e.chans.lostRanks()
	c.cx.ack(len(lost))
	var acked []int
	for _, w := range lost {
		if r := c.g.toLocal(w); r >= 0 {
			acked = append(acked, r)
		}
	}
	return acked
}
