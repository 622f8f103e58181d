package pml

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml/internal/list"
	"github.com/gobtl/gobtl/pml/internal/pool"
)

// maxContexts bounds context ids; a frame naming a larger one is bad.
const maxContexts = 1 << 16

// matcher is the PML's matching engine (ob1's per-communicator matching
// state): the communication contexts by id, each with its receives
// posted and the messages that arrived before a receive matched them, and
// the copies of those messages. Matching follows MPI's rules — the first
// posted receive that matches takes the first message that matches it,
// AnySource and AnyTag match any — given messages that reach it in PSN
// order per peer (the channels' job). Which frame arrives when, and what
// a match sets off (a copy, a rendezvous), are the engine's.
type matcher struct {
	ctxs []*matchContext
	// next is the next context id Dup hands out; every rank duplicates
	// in the same order (Dup is collective), so ids agree without talking.
	next  uint32
	unexp pool.Pool[unexpected]
	bufs  pool.Bytes    // copies of unexpected messages
	kept  *core.Counter // pml.unexpected
}

// init readies m, counting the messages it keeps as unexpected in kept.
func (m *matcher) init(kept *core.Counter) {
	m.next, m.kept = 2, kept
}

// context returns context id, creating it on first use: a peer may send
// on a duplicated communicator before this rank has duplicated it. An id
// out of range is nil.
func (m *matcher) context(id uint32) *matchContext {
	if int(id) < len(m.ctxs) {
		if c := m.ctxs[id]; c != nil {
			return c
		}
	}
	if id >= maxContexts {
		return nil
	}
	for uint32(len(m.ctxs)) <= id {
		m.ctxs = append(m.ctxs, nil)
	}
	c := &matchContext{}
	m.ctxs[id] = c
	return c
}

// nextContext is the lowest context id not handed out.
func (m *matcher) nextContext() uint32 { return m.next }

// dup hands out the next pair of context ids, a communicator's and its
// collectives'.
func (m *matcher) dup() (uint32, error) {
	if m.next >= maxContexts-1 {
		return 0, fmt.Errorf("pml: dup: all %d contexts used: %w", maxContexts/2, core.ErrNoResources)
	}
	ctx := m.next
	m.next += 2
	return ctx, nil
}

// derive takes the pair of context ids from ctx, agreed with the other
// members of a communicator: one not handed out, even and in range.
func (m *matcher) derive(ctx uint32) error {
	if ctx < m.next || ctx%2 != 0 || ctx >= maxContexts-1 {
		return fmt.Errorf("pml: derive: context %d is in use, odd or beyond %d (next free: %d): %w", ctx, maxContexts-2, m.next, ErrInvalid)
	}
	m.next = ctx + 2
	return nil
}

// keep queues on c a message no posted receive matched, copying header
// and payload; total is the message's full length.
func (m *matcher) keep(c *matchContext, h *core.Header, payload []byte, total int) {
	m.kept.Inc()
	u := m.unexp.Get()
	u.src, u.tag, u.kind, u.hdr, u.total = int(h.Src), int(h.Tag), h.Type, *h, total
	u.data = m.bufs.Get(len(payload))
	copy(u.data, payload)
	c.unexpected.PushBack(&u.link, u)
}

// release recycles u, taken off its context by a receive.
func (m *matcher) release(u *unexpected) {
	m.bufs.Put(u.data)
	u.data = nil
	m.unexp.Put(u)
}

// matchContext is one communication context: its posted receives and its
// unexpected messages, both in order. Matching walks them front to back, so
// the first posted receive that matches takes the first message that
// matches it — MPI's non-overtaking rule, given that messages reach
// matching in PSN order per peer.
type matchContext struct {
	posted     list.List[Request]
	unexpected list.List[unexpected]
	// acked is how many of the engine's lost peers (channels.lostRanks) the
	// communicator has acknowledged (Comm.AckFailed): while fewer, its
	// wildcard receives and probes fail.
	acked int
}

// unexpected is a message that arrived before a receive matched it: a
// whole eager message (copied), or a rendezvous start (copied).
type unexpected struct {
	src   int
	tag   int
	kind  core.FrameType
	total int    // message length
	data  []byte // the eager payload or the START payload, copied
	hdr   core.Header
	link  list.Link[unexpected]
}

func matches(wantSrc, wantTag, src, tag int) bool {
	return (wantSrc == AnySource || wantSrc == src) && (wantTag == AnyTag || wantTag == tag)
}

// post queues r, a receive no message kept matched, behind those posted.
func (c *matchContext) post(r *Request) { c.posted.PushBack(&r.link, r) }

// unpost takes r off the posted list (matched, cancelled or failed).
func (c *matchContext) unpost(r *Request) { c.posted.Remove(&r.link) }

// hasPosted reports whether a receive is posted.
func (c *matchContext) hasPosted() bool { return c.posted.Front() != nil }

// hasUnexpected reports whether a message waits for its receive.
func (c *matchContext) hasUnexpected() bool { return c.unexpected.Front() != nil }

// postsBehind reports whether a receive posted now goes behind another,
// with no message kept that it could match first: Irecv's common case in
// a window, which needs no look at either list.
func (c *matchContext) postsBehind() bool {
	return c.posted.Front() != nil && c.unexpected.Front() == nil
}

// matchPosted returns the first posted receive that takes a message from
// job rank src with tag, left posted.
func (c *matchContext) matchPosted(src, tag int) *Request {
	for k := c.posted.Front(); k != nil; k = k.Next() {
		if r := k.Value(); matches(r.peer, r.tag, src, tag) {
			return r
		}
	}
	return nil
}

// takePosted is matchPosted that takes the receive off the list.
func (c *matchContext) takePosted(src, tag int) *Request {
	r := c.matchPosted(src, tag)
	if r != nil {
		c.posted.Remove(&r.link)
	}
	return r
}

// firstFrom returns the first posted receive that could take a message
// from job rank src, whatever its tag.
func (c *matchContext) firstFrom(src int) *Request {
	for k := c.posted.Front(); k != nil; k = k.Next() {
		if r := k.Value(); r.peer == src || r.peer == AnySource {
			return r
		}
	}
	return nil
}

// mayMatch reports whether a posted receive could take a message from
// job rank src that a receive for tag (maybe AnyTag) would take: it was
// posted first, so it would take it first.
func (c *matchContext) mayMatch(src, tag int) bool {
	for k := c.posted.Front(); k != nil; k = k.Next() {
		r := k.Value()
		if (r.peer == src || r.peer == AnySource) && (r.tag == AnyTag || tag == AnyTag || r.tag == tag) {
			return true
		}
	}
	return false
}

// matchUnexpected returns the first message kept that a receive from src
// with tag (either maybe a wildcard) takes, left kept (a probe's look).
func (c *matchContext) matchUnexpected(src, tag int) *unexpected {
	for k := c.unexpected.Front(); k != nil; k = k.Next() {
		if u := k.Value(); matches(src, tag, u.src, u.tag) {
			return u
		}
	}
	return nil
}

// takeUnexpected is matchUnexpected that takes the message off the list,
// for a receive; the matcher's release recycles it after. The test of an
// empty list is inlined into the receive, the walk is not.
func (c *matchContext) takeUnexpected(src, tag int) *unexpected {
	if c.unexpected.Front() == nil {
		return nil
	}
	return c.removeUnexpected(src, tag)
}

// removeUnexpected is takeUnexpected's walk.
func (c *matchContext) removeUnexpected(src, tag int) *unexpected {
	u := c.matchUnexpected(src, tag)
	if u != nil {
		c.unexpected.Remove(&u.link)
	}
	return u
}

// ack records that the communicator acknowledged the first n lost peers.
func (c *matchContext) ack(n int) { c.acked = n }

// acknowledged is how many lost peers the communicator acknowledged.
func (c *matchContext) acknowledged() int { return c.acked }

// unacked returns the error a wildcard receive or probe on cx, a context
// of a communicator of group g, fails with while a lost member of g is
// unacknowledged (ULFM's MPI_ERR_PROC_FAILED_PENDING rule), or nil. A
// loss outside the group concerns no wildcard of it.
func (e *engine) unacked(cx *matchContext, g *group) error {
	lost := e.chans.lostRanks()
	for _, w := range lost[min(cx.acknowledged(), len(lost)):] {
		if g != nil && g.local[w] < 0 {
			continue
		}
		return fmt.Errorf("pml: any source: rank %d is lost and not acknowledged (Comm.AckFailed): %w", g.toLocal(w), e.lostErr(w))
	}
	return nil
}
