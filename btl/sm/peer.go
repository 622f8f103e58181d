package sm

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gobtl/gobtl/btl/sm/internal/release"
	"github.com/gobtl/gobtl/core"
)

// peer is the endpoint of one rank: our side of its fast box for us, its
// FIFO, and what we know of its process.
type peer struct {
	m         *Module
	rank      int
	seg       *segment
	out       outBox
	fifo      fifoOut
	seq       uint32 // sequence number of the next frame to it
	announced bool   // we are on its active-sender list
	pid       int
	pidfd     int
	cma       bool
	dead      error // set once sends to it must fail
	// The receive side's state of the peer's box for us (Module.rx.in,
	// expect, rxDead), at hand for TakeEager.
	in     *inBox
	expect *uint32
	rxDead *bool
}

var (
	_ core.Endpoint = (*peer)(nil)
	_ core.RDMA     = (*peer)(nil)
)

// Rank is the peer's rank.
func (p *peer) Rank() int { return p.rank }

// Send copies the frame into the peer's fast box when it fits and the box
// has room, otherwise into one of our fragments queued on the peer's FIFO.
// It returns ErrNoResources when neither has room.
func (p *peer) Send(h core.Header, pre, data []byte, flags core.SendFlags) error {
	if p.dead != nil {
		return p.dead
	}
	m := p.m
	n := len(pre) + len(data)
	h.Length = uint32(n)
	h.Credits = 0
	h.Flags &^= core.FlagBacklog
	if core.HeaderSize+n <= m.fboxMax {
		if !p.announced {
			p.announce()
		}
		if hw := h.Words(); p.out.put(&hw, pre, data, p.seq) {
			p.seq++
			m.st.fboxSends++
			if flags&core.SendSolicited != 0 {
				wake(p.seg)
			}
			return nil
		}
		m.st.fboxFull++
	}
	if n > m.cfg.attrs.MaxSendSize {
		return fmt.Errorf("sm: send of %d bytes to rank %d exceeds max_send_size %d", n, p.rank, m.cfg.attrs.MaxSendSize)
	}
	if err := p.sendFrag(&h, pre, data); err != nil {
		if core.HeaderSize+n <= m.fboxMax {
			// The fast box may have room at the next try, which the
			// module does not watch (Replenished).
			m.tx.replenished++
		}
		return err
	}
	if flags&core.SendSolicited != 0 {
		wake(p.seg)
	}
	return nil
}

// SendEager writes an EAGER frame straight into the peer's fast box
// (core.Eager): Send's first case without a header passed by value
// and adjusted, and — when the slot fits before the end of the ring and
// the read position last seen leaves room — put's work done in place,
// without its call, its copy of the header words or a memmove for a
// payload of 8 to 16 bytes. The first frame to a peer, one too long for
// the box or one that finds the box full goes by Send.
func (p *peer) SendEager(ctx uint32, tag int32, psn uint32, data []byte) bool {
	m, o := p.m, &p.out
	n := core.HeaderSize + len(data)
	if p.dead != nil || !p.announced || n > m.fboxMax {
		return false
	}
	need := slotBytes(n)
	idx := o.tail & o.mask
	if idx+need > o.size || o.size-(o.tail-o.head) < need+cacheLine {
		return p.sendEagerRoom(ctx, tag, psn, data) // put's slow case
	}
	slot := unsafe.Add(o.base, idx)
	core.PutEagerHeader((*[core.HeaderSize]byte)(unsafe.Add(slot, slotHdr)), int32(m.rank), ctx, tag, psn, len(data))
	putPayload(unsafe.Add(slot, slotHdr+core.HeaderSize), data)
	seq := p.seq
	p.seq++
	m.st.fboxSends++
	if o.advance(need) { // publish, in place
		o.publishNearFrontier(slot, uint64(n)|uint64(seq)<<32)
		return true
	}
	release.Store64((*uint64)(slot), uint64(n)|uint64(seq)<<32)
	return true
}

// sendEagerRoom is SendEager through put, for a slot that may not fit:
// put finds the room or declines.
func (p *peer) sendEagerRoom(ctx uint32, tag int32, psn uint32, data []byte) bool {
	if hw := core.EagerWords(int32(p.m.rank), ctx, tag, psn, len(data)); !p.out.put(&hw, nil, data, p.seq) {
		return false
	}
	p.seq++
	p.m.st.fboxSends++
	return true
}

// announce puts us on the peer's list of senders whose boxes it polls.
func (p *peer) announce() {
	seg := p.seg
	i := atomic.AddUint32(seg.u32(offActiveN), 1) - 1
	if int(i) < seg.lay.size {
		atomic.StoreUint32(seg.u32(seg.lay.activeOff+4*int(i)), uint32(p.m.rank+1))
	}
	p.announced = true
}

// The pipeline's sender meets these at every poll while it waits for the
// receiver to hand fragments back — millions of times in a run of osu bw
// at 4 MiB — so they are made once: an error built per call was an
// allocation each time, and garbage the collector's workers cleared on
// the receiver's core.
var (
	errNoFrags  = fmt.Errorf("sm: all fragments in flight: %w", core.ErrNoResources)
	errFifoFull = fmt.Errorf("sm: the receiver's FIFO is full: %w", core.ErrNoResources)
)

func (p *peer) sendFrag(h *core.Header, pre, data []byte) error {
	m := p.m
	if len(m.tx.free) == 0 {
		m.reclaim()
		if len(m.tx.free) == 0 {
			// No checkSoon here: a sender waiting for fragments meets this
			// at every poll, and a liveness check at each (a ppoll on the
			// pidfds) was 800,000 system calls in 20 windows of osu bw at
			// 4 MiB. A dead receiver holding fragments is found by the
			// check every liveness_interval all the same.
			m.st.noResources++
			return errNoFrags
		}
	}
	idx := m.tx.free[len(m.tx.free)-1]
	off := m.seg.lay.frag(int(idx))
	n := core.HeaderSize + len(pre) + len(data)
	pad := (cacheLine - (core.HeaderSize+len(pre))%cacheLine) % cacheLine
	b := m.seg.mem[off+fragHdr+pad : off+fragHdr+pad+n]
	h.Encode(b)
	k := copy(b[core.HeaderSize:], pre)
	if dst := b[core.HeaderSize+k:]; m.cfg.autoCopy && len(data) >= copyTimedMin {
		m.copyInChosen(dst, data)
	} else {
		copyOut(dst, data, m.cfg.stream)
	}
	*m.seg.u32(off + fragOffSeq) = p.seq
	*m.seg.u32(off + fragOffLen) = uint32(n)
	*m.seg.u32(off + fragOffFrame) = uint32(pad)
	*m.seg.u32(off + fragOffDone) = 0
	if !p.fifo.push(makeDesc(m.rank, off)) {
		m.st.noResources++
		m.tx.replenished++ // the receiver frees cells unseen: try again at the next poll
		return errFifoFull
	}
	m.tx.free = m.tx.free[:len(m.tx.free)-1]
	m.tx.inflight[p.rank] = append(m.tx.inflight[p.rank], idx)
	m.tx.inflightN++
	p.seq++
	m.st.fragSends++
	return nil
}

var _ core.Eager = (*peer)(nil)

// TakeEager takes the next frame from the peer when it waits in the
// peer's fast box, is the next in the pair's order, is a plain EAGER frame
// on context ctx with PSN psn and passes the tag filter, and buf holds it
// (core.Eager): it copies the payload out and consumes the slot. A frame
// that does not pass stays (EagerKept); a frame in the FIFO, a lost peer
// or a call from a handler is EagerNone, left to Progress.
//
// The slots it consumes go back to the sender (publish) once a quarter
// of the ring has been consumed, and whenever it finds nothing to take —
// a receiver that waits has always given everything back — not after
// every frame: a window of messages pays one release store, not one
// each. Progress gives them back too. The slot is reached from the
// ring's base without a bounds check: the slot's word was checked to lie
// within the ring.
func (p *peer) TakeEager(ctx, psn uint32, tag int32, ignore uint32, buf []byte) (int32, int, core.EagerResult) {
	m := p.m
	if m.inProgress || m.closed || *p.rxDead {
		return 0, 0, core.EagerNone
	}
	in := p.in
	// peek's common case inline: a slot that is not a frame — the
	// end-of-ring marker, which peek moves past, or a bad one — goes
	// through takeEagerPast, so that nothing here is kept across a call.
	idx := in.head & in.mask
	w := in.word(idx)
	if w == 0 {
		in.publish()
		return 0, 0, core.EagerNone
	}
	fl := uint32(w)
	if fl < core.HeaderSize || fl > in.maxFrame || idx+slotHdr+uint64(fl) > in.size {
		return p.takeEagerPast(ctx, psn, tag, ignore, buf)
	}
	if uint32(w>>32) != *p.expect {
		in.publish()
		return 0, 0, core.EagerNone // the FIFO's turn
	}
	f := unsafe.Add(in.base, idx+slotHdr)
	htag, n, ok := core.EagerMatch((*[core.HeaderSize]byte)(f), int32(p.rank), ctx, psn, int(fl))
	if !ok {
		return 0, 0, core.EagerOther
	}
	if !core.TagPasses(htag, tag, ignore) || n > len(buf) {
		return htag, n, core.EagerKept
	}
	getPayload(buf[:n], unsafe.Add(f, core.HeaderSize))
	in.head += slotBytes(int(fl))
	*p.expect++
	m.st.fboxRecvs++
	if in.head-in.published >= in.size/4 {
		in.publish()
	}
	return htag, n, core.EagerTaken
}

// takeEagerPast is TakeEager at a slot that is not a frame: peek moves
// past the end-of-ring marker, and TakeEager looks at the frame behind
// it; a bad slot is left to Progress, which fails the peer.
func (p *peer) takeEagerPast(ctx, psn uint32, tag int32, ignore uint32, buf []byte) (int32, int, core.EagerResult) {
	if _, _, ok, _ := p.in.peek(); !ok {
		p.in.publish()
		return 0, 0, core.EagerNone
	}
	return p.TakeEager(ctx, psn, tag, ignore, buf)
}

var _ core.Resources = (*peer)(nil)

// PreferRendezvous is false: sm runs no credit flow control, a frame that
// finds no room is refused and waits in the PML's backlog
// (core.Resources).
func (p *peer) PreferRendezvous() bool { return false }

// Replenished counts the times the module took fragments back, and the
// refusals whose end it cannot see (core.Resources): a pipeline sender
// refused for want of a fragment then waits for a receiver to finish one
// instead of asking again at every poll — tens of millions of refused
// sends in a run of osu bw at 4 MiB, each a full pass of the PML's pump.
// The fragments are the module's, so the count is too.
func (p *peer) Replenished() uint64 { return p.m.tx.replenished }

// FragsInFlight counts our fragments to this peer it has not consumed, as
// of the last Progress's reclaim (core.Resources).
func (p *peer) FragsInFlight() int { return len(p.m.tx.inflight[p.rank]) }

// plainPeer is the endpoint of a module without CMA: the peer's
// endpoint without Put and Get (core.RDMA), so that the PML moves
// rendezvous data by the pipeline. It forwards the rest: a type that
// embedded *peer would offer Put and Get too, and the common case, with
// CMA, hands out *peer itself, so that the fast path pays no wrapper.
type plainPeer struct{ p *peer }

var (
	_ core.Eager     = plainPeer{}
	_ core.Resources = plainPeer{}
)

// Rank is the peer's rank.
func (e plainPeer) Rank() int { return e.p.rank }

// Send is peer.Send.
func (e plainPeer) Send(h core.Header, pre, data []byte, flags core.SendFlags) error {
	return e.p.Send(h, pre, data, flags)
}

// SendEager is peer.SendEager.
func (e plainPeer) SendEager(ctx uint32, tag int32, psn uint32, data []byte) bool {
	return e.p.SendEager(ctx, tag, psn, data)
}

// TakeEager is peer.TakeEager.
func (e plainPeer) TakeEager(ctx, psn uint32, tag int32, ignore uint32, buf []byte) (int32, int, core.EagerResult) {
	return e.p.TakeEager(ctx, psn, tag, ignore, buf)
}

// PreferRendezvous is peer.PreferRendezvous.
func (e plainPeer) PreferRendezvous() bool { return false }

// FragsInFlight is peer.FragsInFlight.
func (e plainPeer) FragsInFlight() int { return e.p.FragsInFlight() }

// Replenished is peer.Replenished.
func (e plainPeer) Replenished() uint64 { return e.p.Replenished() }
