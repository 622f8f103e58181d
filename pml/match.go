package pml

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml/internal/list"
)

// maxContexts bounds context ids; a frame naming a larger one is bad.
const maxContexts = 1 << 16

// matchContext is one communication context: its posted receives and its
// unexpected messages, both in order. Matching walks them front to back, so
// the first posted receive that matches takes the first message that
// matches it — MPI's non-overtaking rule, given that messages reach
// matching in PSN order per peer.
type matchContext struct {
	posted     list.List[Request]
	unexpected list.List[unexpected]
	// acked is how many of the engine's lost peers (engine.lost) the
	// communicator has acknowledged (Comm.AckFailed): while fewer, its
	// wildcard receives and probes fail.
	acked int
}

// unacked returns the error a wildcard receive or probe on cx, a context
// of a communicator of group g, fails with while a lost member of g is
// unacknowledged (ULFM's MPI_ERR_PROC_FAILED_PENDING rule), or nil. A
// loss outside the group concerns no wildcard of it.
func (e *engine) unacked(cx *matchContext, g *group) error {
	for _, w := range e.lost[min(cx.acked, len(e.lost)):] {
		if g != nil && g.local[w] < 0 {
			continue
		}
		return fmt.Errorf("pml: any source: rank %d is lost and not acknowledged (Comm.AckFailed): %w", g.toLocal(w), e.lostErr(w))
	}
	return nil
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

// context returns context id, creating it on first use: a peer may send on
// a duplicated communicator before this rank has duplicated it.
func (e *engine) context(id uint32) *matchContext {
	if int(id) < len(e.ctxs) {
		if c := e.ctxs[id]; c != nil {
			return c
		}
	}
	if id >= maxContexts {
		return nil
	}
	for uint32(len(e.ctxs)) <= id {
		e.ctxs = append(e.ctxs, nil)
	}
	c := &matchContext{}
	e.ctxs[id] = c
	return c
}

func (c *matchContext) matchPosted(src, tag int) *Request {
	for k := c.posted.Front(); k != nil; k = k.Next() {
		if r := k.Value(); matches(r.peer, r.tag, src, tag) {
			return r
		}
	}
	return nil
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

func (c *matchContext) matchUnexpected(src, tag int) *unexpected {
	for k := c.unexpected.Front(); k != nil; k = k.Next() {
		if u := k.Value(); matches(src, tag, u.src, u.tag) {
			return u
		}
	}
	return nil
}

// newUnexpected copies a frame into an unexpected entry (lock held).
func (e *engine) newUnexpected(h *core.Header, payload []byte) *unexpected {
	u := e.free.unexp.Get()
	u.src, u.tag, u.kind, u.hdr = int(h.Src), int(h.Tag), h.Type, *h
	u.data = e.bufs.Get(len(payload))
	copy(u.data, payload)
	return u
}

func (e *engine) freeUnexpected(u *unexpected) {
	e.bufs.Put(u.data)
	u.data = nil
	e.free.unexp.Put(u)
}
