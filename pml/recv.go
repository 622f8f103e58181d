package pml

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// onMatchable receives EAGER and RNDV_START frames. They carry the virtual
// channel's PSN and reach matching strictly in PSN order: a frame that is
// early waits in the out-of-order queue (seed 001 §5.2), so messages never
// overtake each other even when they travel different subchannels or one
// goes eager and the next by rendezvous.
func (e *engine) onMatchable(h *core.Header, payload []byte) {
	p := e.chans.get(int(h.Src))
	if p.failed() != nil {
		return
	}
	switch p.arrive(h.PSN) {
	case late:
		e.badFrame(h.Src, badFrame(h.Src, "psn", uint64(h.PSN), fmt.Sprintf("already delivered (expecting %d)", p.expected())))
		return
	case early:
		e.m.ooo.Inc()
		if !e.chans.stash(p, h, payload) {
			e.badFrame(h.Src, badFrame(h.Src, "psn", uint64(h.PSN), "duplicate sequence number"))
		}
		return
	}
	e.deliver(h, payload)
	p.delivered()
	for f := p.ready(); f != nil; f = p.ready() {
		e.deliver(&f.h, f.data)
		p.delivered()
		e.chans.release(f)
	}
}

// deliver matches an in-order EAGER or START against the posted receives
// of its context, or keeps it as unexpected.
func (e *engine) deliver(h *core.Header, payload []byte) {
	c := e.match.context(h.Context)
	if c == nil {
		e.badFrame(h.Src, badFrame(h.Src, "context", uint64(h.Context), "context id out of range"))
		return
	}
	if h.Type != core.TypeEager {
		e.deliverStart(c, h, payload)
		return
	}
	r := c.takePosted(int(h.Src), int(h.Tag))
	if r == nil {
		e.match.keep(c, h, payload, len(payload))
		return
	}
	e.recvEager(r, h, payload)
}

// deliverStart is deliver for a RNDV_START, apart so that an eager
// message does not clear a startMsg (keys included, some 400 bytes).
func (e *engine) deliverStart(c *matchContext, h *core.Header, payload []byte) {
	var st startMsg
	if err := st.decode(h.Src, payload); err != nil {
		e.badFrame(h.Src, err)
		return
	}
	r := c.takePosted(int(h.Src), int(h.Tag))
	if r == nil {
		e.match.keep(c, h, payload, int(st.total))
		return
	}
	e.rndv.matched(r, h, &st)
}

// matchedStatus fills in source and tag once a receive has matched.
func (r *Request) matched(src int, tag int32, total int) {
	r.src = src
	r.total = total
	r.accept = min(total, len(r.buf))
	r.status.Source, r.status.Tag = r.g.toLocal(src), int(tag)
}

func (e *engine) truncErr(r *Request) error {
	if r.accept == r.total {
		return nil
	}
	return e.truncated(r)
}

// truncated counts a truncated receive and returns its error; apart from
// truncErr, so that the check of every message is inlined.
func (e *engine) truncated(r *Request) error {
	e.m.truncated.Inc()
	return e.fail(fmt.Errorf("pml: %d-byte message from rank %d tag %d into a %d-byte buffer: %w", r.total, r.src, r.status.Tag, len(r.buf), core.ErrTruncated))
}

func (e *engine) recvEager(r *Request, h *core.Header, payload []byte) {
	e.recvEagerFrom(r, int(h.Src), h.Tag, payload)
}

// recvEagerFrom completes r with an eager message from job rank src with
// tag: recvEager without a decoded header (the fused path has none).
func (e *engine) recvEagerFrom(r *Request, src int, tag int32, payload []byte) {
	r.matched(src, tag, len(payload))
	copy(r.buf[:r.accept], payload)
	e.eagerDone(r)
}

// eagerDone completes r, matched, once its eager payload is in its buffer.
func (e *engine) eagerDone(r *Request) {
	r.status.Count = r.accept
	e.hot.bytesRecv += int64(r.accept)
	e.complete(r, e.truncErr(r))
}

// recvUnexpected completes a new receive from an unexpected message.
func (e *engine) recvUnexpected(r *Request, u *unexpected) {
	if u.kind == core.TypeEager {
		e.recvEager(r, &u.hdr, u.data)
	} else {
		var st startMsg
		_ = st.decode(u.hdr.Src, u.data) // checked on arrival
		e.rndv.matched(r, &u.hdr, &st)
	}
	e.match.release(u)
}
