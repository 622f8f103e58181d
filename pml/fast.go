package pml

import "github.com/gobtl/gobtl/core"

// The fused receive path. A blocking Recv from one peer (and a Wait on a
// receive posted for one peer) spends most of its instructions, when
// taken the general way, on layers that a plain eager message from the
// only module to the peer does not need: polling every module, decoding
// the whole header, a handler call, the PSN and context look-ups, a
// request, and — for Recv — a trip through the posted list. When the
// channel to the peer is one subchannel whose endpoint offers the eager
// fast path (core.Eager: sm's fast box), the fused path looks at that
// frame alone, in one call per message (TakeEager): the endpoint checks in
// four words that it is the next in-order EAGER frame of the right
// context, and when its tag passes the receive's filter (the tag, or
// every tag for AnyTag) and the buffer holds it, copies its payload into
// the user's buffer and consumes it. A frame it keeps comes back with its
// tag and length, for the PML to match to another receive.
//
// MPI's order holds because the path steps aside whenever the general
// one could decide differently: a message kept as unexpected or a
// receive posted earlier that could match comes first; a frame out of
// PSN order, of another tag, context or type (rendezvous), too long for
// the buffer, or a frame that is not in the fast box, is left where it
// is for Progress; a progress thread, work waiting for resources,
// operations of the layers above, a scheduler policy, virtual time or a
// lost peer turn the path off. It never consumes a frame it does not
// complete a receive with, so stepping aside costs nothing but the look.
// An Irecv with no receive posted before it on its context takes an
// arrived message the same way, and returns its request done.
//
// The fused send path is the mirror: under the same conditions (fastOK),
// an eager Isend or Send to a peer whose only subchannel's endpoint
// offers the eager fast path hands it the header's fields and the
// payload (SendEager), and Isend returns a request done at once. Anything the endpoint declines — the first frame to a peer, a
// frame too long for the box, a full box — goes by the general path,
// which the transport keeps in order with the fused one.

// fastResult is what a look at a peer's next frame found.
type fastResult uint8

const (
	fastEmpty fastResult = iota // nothing from the peer yet: look again
	fastDone                    // the receive completed
	fastNo                      // the general path must take over
)

// fastPeer returns the channel to job rank src when the fused path may
// poll it alone, else nil (lock held).
func (e *engine) fastPeer(src int) *peer {
	p := e.chans.get(src)
	if p.direct == nil || !e.fastOK(p) {
		return nil
	}
	return p
}

// fastOK reports whether nothing turns the fused paths off for p, a
// channel that could take them (lock held).
func (e *engine) fastOK(p *peer) bool {
	return p.quiet() && !e.unfused && e.pendingWork == 0 && e.nops.Load() == 0
}

// direct reports whether the channel to job rank src could take the
// fused path, so that a waiter on any other pays one look (lock held).
func (e *engine) direct(src int) bool {
	p := e.chans.lookup(src)
	return p != nil && p.direct != nil
}

// consumed counts a frame the fused path delivered, n bytes of it to the
// user (lock held).
func (e *engine) consumed(p *peer, n int) {
	p.delivered()
	e.events++
	e.hot.bytesRecv += int64(n)
	e.hot.fused++
}

// tookEager completes q, a receive taken off the posted list, with the
// n-byte message from p with tag that TakeEager placed whole in q's
// buffer (lock held): matched, eagerDone, complete and consumed for the
// one case that needs none of their tests — no truncation (a frame too
// long for the buffer is left to Progress), no protocol state, no error
// (a posted receive has none).
func (e *engine) tookEager(q *Request, p *peer, tag int32, n int) {
	q.src, q.total, q.accept = p.rank, n, n
	q.status.Source, q.status.Tag, q.status.Count = q.g.toLocal(p.rank), int(tag), n
	q.done = true
	e.pendingRecvs--
	e.hot.bytesRecv += int64(n)
	e.consumed(p, 0)
	e.maybeRecycle(q) // freed while posted
}

// recvFast is one look of a blocking Recv of a message from job rank src
// with tag (not a wildcard source) into buf (lock held).
func (c *Comm) recvFast(buf []byte, src, tag int) (Status, fastResult) {
	e := c.e
	p := e.fastPeer(src)
	if p == nil {
		return Status{}, fastNo
	}
	cx := c.cx
	if cx.hasUnexpected() && cx.matchUnexpected(src, tag) != nil || cx.hasPosted() && cx.mayMatch(src, tag) {
		return Status{}, fastNo
	}
	return e.takeFast(p, c.g, c.ctx, buf, tag)
}

// takeFast receives p's next frame into buf if it is the in-order EAGER
// frame on context ctx that a receive for tag (maybe AnyTag) takes, for a
// communicator of group g (lock held). The caller has made sure that no
// message kept as unexpected and no receive posted earlier comes first.
func (e *engine) takeFast(p *peer, g *group, ctx uint32, buf []byte, tag int) (Status, fastResult) {
	ftag, ignore := tagFilter(tag)
	htag, n, res := p.direct.TakeEager(ctx, p.expected(), ftag, ignore, buf)
	switch res {
	case core.EagerTaken:
		e.consumed(p, n)
		return Status{Source: g.toLocal(p.rank), Tag: int(htag), Count: n}, fastDone
	case core.EagerNone:
		return Status{}, fastEmpty
	}
	return Status{}, fastNo // another frame, another tag, a short buffer: the general path
}

// tagFilter is the filter of core.Eager.TakeEager that passes the frames a
// receive for tag (maybe AnyTag) takes.
func tagFilter(tag int) (int32, uint32) {
	if tag == AnyTag {
		return 0, core.IgnoreTag
	}
	return int32(tag), 0
}

// irecvFast completes r, a receive from one peer about to be posted on
// a context with no receive posted before it, at once when its message
// has arrived in order in the peer's fast box — a receiver behind its
// sender pays no posted list, no later look and no Wait for it. The
// caller tests the posted list (inlined, so that a window of receives
// pays no call each to learn that one was posted before). It reports
// whether r completed (lock held).
func (e *engine) irecvFast(r *Request) bool {
	p := e.fastPeer(r.peer)
	if p == nil {
		return false
	}
	st, res := e.takeFast(p, r.g, r.ctx, r.buf, r.tag)
	if res != fastDone {
		return false
	}
	r.status = st
	e.complete(r, nil)
	return true
}

// recvDirect is a blocking Recv over the fused path: it looks at the
// peer's next frame until the message is there, at most Backoff.Spin
// times. It reports how often it looked and whether it received; when it
// did not, the general path takes over, nothing having been consumed.
func (c *Comm) recvDirect(buf []byte, src, tag int) (Status, int, bool) {
	e := c.e
	for i := 0; ; i++ {
		e.mu.Lock()
		st, res := c.recvFast(buf, src, tag)
		if res == fastEmpty && i&63 == 63 {
			// Now and then poll everything: the other peers and the
			// modules' housekeeping do not wait for this message. A
			// message from src it delivers is kept as unexpected, where
			// the next look finds it and steps aside for the general
			// path, which takes it from there.
			e.progress()
		}
		e.mu.Unlock()
		switch {
		case res == fastDone:
			return st, i, true
		case res == fastNo || i >= e.opts.Backoff.Spin || e.aborted() != nil:
			return Status{}, i, false
		}
	}
}

// waitFast is one look of a Wait on r, a receive posted for one peer
// (lock held): it delivers the peer's next frames while they are
// in-order EAGER frames of r's context that a posted receive matches —
// the first that does, as delivery by Progress would choose — up to a
// batch, past r's own: a window of receives (Waitall) thus completes in
// one call, as a Progress that delivers a batch would. It returns how
// many frames it delivered, and fastDone if r completed.
//
// It offers each frame to the first receive posted for the peer, which
// takes it unless its tag differs (or its buffer is short); then the
// frame, still in place, goes to the first receive that matches its tag.
// A buffer too short for it is Progress's to truncate.
func (e *engine) waitFast(r *Request) (int, fastResult) {
	p := e.fastPeer(r.peer)
	if p == nil {
		return 0, fastNo
	}
	cx := e.match.context(r.ctx)
	n := 0
	for n < fastBatch {
		q := cx.firstFrom(p.rank)
		if q == nil {
			break // r is done: a receive of r's would come first
		}
		tag, ignore := tagFilter(q.tag)
		htag, k, res := p.direct.TakeEager(r.ctx, p.expected(), tag, ignore, q.buf)
		if res == core.EagerKept {
			if q = cx.matchPosted(p.rank, int(htag)); q == nil {
				if r.done {
					break
				}
				return n, fastNo // Progress keeps it as unexpected
			}
			htag, k, res = p.direct.TakeEager(r.ctx, p.expected(), htag, 0, q.buf)
		}
		if res == core.EagerNone && r.done {
			break
		}
		switch res {
		case core.EagerNone:
			return n, fastEmpty
		case core.EagerKept, core.EagerOther:
			return n, fastNo // a short buffer is Progress's to truncate
		}
		cx.unpost(q)
		e.tookEager(q, p, htag, k)
		n++
	}
	if !r.done {
		return n, fastEmpty
	}
	return n, fastDone
}

// fastBatch bounds the frames waitFast and takeFastRun deliver in one
// call, as the modules bound theirs per Progress.
const fastBatch = 64

// takeFastRun is waitFast for a Waitall whose requests from rs[i] on are
// the receives first in line for one peer's frames, in order: a window
// of Irecvs. It delivers the peer's next in-order EAGER frames into them
// and releases each at once, as takeDoneRun would when the wait is over —
// a receive that Waitall releases the moment it completes need not be
// completed first (its status set, its done flag read back) and then
// released; its status goes to sts[i] when sts is not nil. It stops, up
// to a batch, at the first request it cannot so take — not a receive
// posted for that peer, not the one the peer's next frame goes to (the
// first posted receive that may match it, as waitFast chooses), or a
// frame that is not there, not in order, of another tag or too long —
// and returns its index for takeDoneRun and waitLive (lock held): one
// call into the endpoint per message.
func (e *engine) takeFastRun(rs []*Request, sts []Status, i int) int {
	r := rs[i]
	if r.e != e || !r.posted() || r.peer == AnySource {
		return i
	}
	p := e.fastPeer(r.peer)
	if p == nil {
		return i
	}
	ctx := r.ctx
	cx := e.match.context(ctx)
	for end := min(len(rs), i+fastBatch); i < end; i++ {
		q := rs[i]
		if q == nil {
			continue
		}
		// The first receive posted on ctx that may take p's frames is
		// ours, posted (so without protocol state or references) and
		// on ctx; a released one (freed while posted) is Wait's error.
		if cx.firstFrom(p.rank) != q || q.released {
			return i
		}
		tag, ignore := tagFilter(q.tag)
		htag, n, res := p.direct.TakeEager(ctx, p.expected(), tag, ignore, q.buf)
		if res != core.EagerTaken {
			return i
		}
		cx.unpost(q)
		e.pendingRecvs--
		e.hot.bytesRecv += int64(n)
		e.consumed(p, 0)
		e.hot.fusedReleased++
		if sts != nil {
			sts[i] = Status{Source: q.g.toLocal(p.rank), Tag: int(htag), Count: n}
		}
		q.released = true // a handle used again is Wait's error
		e.recycle(q)
		rs[i] = nil
	}
	return i
}

// sendDirect sends buf to job rank dest as an EAGER frame on context ctx
// by the fused send path — written straight into the peer's memory by
// the only subchannel's core.Eager — when the fused receive path could
// poll that peer (fastOK: the same conditions, so a policy, queued work
// or a lost peer turn both off) and the message is eager. It reports
// false, having sent nothing and taken no PSN, when the general path
// must send it (lock held).
func (e *engine) sendDirect(ctx uint32, buf []byte, dest, tag int) bool {
	p := e.chans.get(dest)
	if p.direct == nil || len(buf) > p.directEager || !e.fastOK(p) ||
		!p.direct.SendEager(ctx, int32(tag), p.nextPSN(), buf) {
		return false
	}
	p.directMod.armed = true
	p.tookPSN()
	e.hot.eagerSends++
	e.hot.bytesSent += int64(len(buf))
	e.hot.fusedSends++
	return true
}
