//go:build ofi && cgo

package ofi

import (
	"errors"
	"fmt"
	"time"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
	"github.com/gobtl/gobtl/core"
)

// Errors of the hot paths, made once so that a refused Send allocates
// nothing.
var (
	errNoCredit  = fmt.Errorf("ofi: the peer's receive class is out of credits: %w", core.ErrNoResources)
	errBusy      = fmt.Errorf("ofi: the provider's queue is full: %w", core.ErrNoResources)
	errNoSendBuf = fmt.Errorf("ofi: no free send buffer: %w", core.ErrNoResources)
	errNoSlot    = fmt.Errorf("ofi: too many RDMA operations in flight: %w", core.ErrNoResources)
	errWaitFull  = fmt.Errorf("ofi: too many frames waiting for the session: %w", core.ErrNoResources)
	errClosed    = fmt.Errorf("ofi: %w", core.ErrClosed)
)

// txState is where the session this rank dials to a peer stands.
type txState uint8

const (
	txIdle  txState = iota
	txHello         // the provider could not take the hello yet
	txUp            // the hello left: frames go with the token
)

// peer is the module's handle on one rank: the core.Endpoint, both
// directions of its sessions, its credits and its liveness.
type peer struct {
	m     *Module
	rank  int
	addr  fabric.Addr
	pub   *published
	ident []byte
	err   error // lost or closed: every later operation fails with it

	// The session this rank dials (auth.go), and frames waiting for it
	// or, behind one that waits, for a credit.
	tx       txState
	helloMsg [helloLen]byte
	txTok    uint64
	txSeq    uint16
	wait     []waiting
	flushing bool
	cred     []credit // per class: credits to send with

	// The session the peer dials: its token, the next frame in order and
	// those that came early, credits owed to it.
	rxTok     uint64
	rxSeq     uint16
	early     []early
	byeSeq    uint16
	byeSeen   bool
	dropOwed  bool   // Disconnect's drop is still to be sent
	lastHello uint64 // the counter of the last hello taken from it
	owed      []int
	due       bool
	dueGen    uint64

	// Liveness (live.go).
	heard     time.Duration
	probed    time.Duration
	refusedAt time.Duration // since when (+1) the provider refuses its probes; 0: it does not
	inflight  int           // sends to it whose completion has not come
	frags     int           // frames among them (core.Resources)
	proc      *procState    // a peer in this process
	pidfd     int
	remote    bool
	maxWaitCt int

	ps peerStats
}

// waiting is a frame accepted by Send that waits, gathered in a send
// buffer, for the session or a credit.
type waiting struct {
	c     *rxClass
	buf   int
	h     core.Header
	flags core.SendFlags
}

func newPeer(m *Module, rank int, addr fabric.Addr, pub *published) *peer {
	p := &peer{m: m, rank: rank, addr: addr, pub: pub, ident: identity(rank, pub.name), pidfd: -1,
		cred: make([]credit, len(m.classes)), owed: make([]int, len(m.classes)), heard: m.now,
		maxWaitCt: m.cfg.sendBuffers}
	for i := range p.cred {
		p.cred[i] = credit{counted: pub.window[i] > 0, avail: pub.window[i]}
	}
	return p
}

// Rank implements core.Endpoint.
func (p *peer) Rank() int { return p.rank }

// Send implements core.Endpoint. A frame goes at once when the session
// is up, nothing waits before it and its class has a credit; it waits,
// copied, for the session to come up (and then its credits); without a
// credit it is refused with core.ErrNoResources (the PML's backlog holds
// it), as when the provider's queue is full.
func (p *peer) Send(h core.Header, pre, data []byte, flags core.SendFlags) error {
	m := p.m
	if m.closed {
		return errClosed
	}
	if p.err != nil {
		return p.err
	}
	n := len(pre) + len(data)
	c := m.classFor(n)
	if c == nil {
		return fmt.Errorf("ofi: a %d-byte frame exceeds the %d-byte maximum", n, m.attrs.MaxSendSize)
	}
	h.Length = uint32(n)
	if p.tx == txHello {
		p.sendHello()
	}
	if p.tx != txUp || len(p.wait) > 0 {
		return p.hold(c, &h, pre, data, flags)
	}
	if cr := &p.cred[c.idx]; cr.counted && flags&core.SendNoFlowControl == 0 && cr.avail <= 0 {
		p.refused(c.idx)
		return errNoCredit
	}
	return p.post(c, -1, &h, pre, data, flags)
}

// post puts a frame on the wire with the credits owed to the peer and,
// if it waited for a credit, the backlog bit: injected when it fits the
// provider's inject size, else from a send buffer (buf, if the frame
// waited in one, or a new one). Nothing is spent unless it leaves.
func (p *peer) post(c *rxClass, buf int, h *core.Header, pre, data []byte, flags core.SendFlags) error {
	m := p.m
	credited := flags&core.SendNoFlowControl == 0 && p.cred[c.idx].counted
	owed := min(p.owed[c.idx], 0xffff)
	h.Credits = uint16(owed)
	if credited {
		h.Flags |= p.cred[c.idx].flag(flags&core.SendBacklog != 0)
	}
	cq := cqData(p.txTok, p.txSeq)
	if !credited {
		cq |= dataNoCredit
	}
	total := core.HeaderSize + int(h.Length)
	var err error
	switch {
	case total <= m.inject:
		b := m.scratch[:total]
		if buf >= 0 {
			copy(b, c.sbuf(buf)[:total])
		} else {
			copy(b[core.HeaderSize+copy(b[core.HeaderSize:], pre):], data)
		}
		h.Encode(b)
		if err = c.inject(m.ep, b, cq, p.addr); err == nil {
			m.st.injected.Inc()
			if buf >= 0 {
				c.putSend(buf)
			}
		}
	default:
		fresh := buf < 0
		if fresh {
			if buf = c.getSend(p.rank); buf < 0 {
				return errNoSendBuf
			}
			b := c.sbuf(buf)
			copy(b[core.HeaderSize+copy(b[core.HeaderSize:], pre):], data)
		}
		b := c.sbuf(buf)[:total]
		h.Encode(b)
		err = c.send(m.ep, b, cq, p.addr, ctxOf(kindSend, c.idx, buf))
		if err == nil {
			p.inflight++
			p.frags++
		} else if fresh {
			c.putSend(buf)
		}
	}
	if err != nil {
		if errors.Is(err, fabric.ErrAgain) {
			m.replenished++ // the provider's queue: its end cannot be seen
			return errBusy
		}
		p.lose(fmt.Errorf("send: %w", err))
		return p.err
	}
	p.txSeq++
	p.owed[c.idx] -= owed
	if credited {
		cr := &p.cred[c.idx]
		if cr.commit(flags&core.SendBacklog != 0) {
			m.st.backlogged.Inc()
		}
		cr.avail--
	}
	m.st.framesSent.Inc()
	p.ps.frames.Inc()
	p.ps.bytes.Add(int64(total))
	return nil
}

// hold keeps a frame, copied into a send buffer, until the session is up
// and the frames before it have gone; it starts the session.
func (p *peer) hold(c *rxClass, h *core.Header, pre, data []byte, flags core.SendFlags) error {
	if len(p.wait) >= p.maxWaitCt {
		return errWaitFull
	}
	buf := c.getSend(p.rank)
	if buf < 0 {
		return errNoSendBuf
	}
	b := c.sbuf(buf)
	copy(b[core.HeaderSize+copy(b[core.HeaderSize:], pre):], data)
	p.wait = append(p.wait, waiting{c: c, buf: buf, h: *h, flags: flags})
	if p.tx == txIdle {
		p.dial()
	}
	p.m.wantFlush(p)
	return nil
}

// flushWaiting sends what waits, in order, for every peer whose session
// is up: until a frame finds no credit or the provider's queue is full.
func (m *Module) flushWaiting() int {
	n := 0
	keep := m.flush[:0]
	for _, p := range m.flush {
		n += p.flushOne()
		if len(p.wait) > 0 && p.err == nil {
			keep = append(keep, p)
		} else {
			p.flushing = false
		}
	}
	clear(m.flush[len(keep):])
	m.flush = keep
	return n
}

func (p *peer) flushOne() int {
	if p.tx != txUp {
		return 0
	}
	n := 0
	for len(p.wait) > 0 && p.err == nil {
		w := &p.wait[0]
		if cr := &p.cred[w.c.idx]; cr.counted && w.flags&core.SendNoFlowControl == 0 && cr.avail <= 0 {
			p.refused(w.c.idx)
			break
		}
		if err := p.post(w.c, w.buf, &w.h, nil, nil, w.flags); err != nil {
			break
		}
		p.wait = p.wait[1:]
		n++
	}
	p.m.replenished += uint64(n)
	if len(p.wait) == 0 {
		p.wait = p.wait[:0:0]
	}
	return n
}

// wantFlush lists p among the peers with frames waiting.
func (m *Module) wantFlush(p *peer) {
	if !p.flushing {
		p.flushing = true
		m.flush = append(m.flush, p)
	}
}

var _ core.Resources = (*peer)(nil)

// PreferRendezvous implements core.Resources: when the flow-control
// policy asks for it, a peer whose per-peer class is out of credits gets
// small messages by rendezvous, so that the handshake brings credits
// back (seed 000 §4.2), as ib's per-peer queues do.
func (p *peer) PreferRendezvous() bool {
	if !p.m.rndv || p.tx != txUp || p.err != nil {
		return false
	}
	for i, c := range p.m.classes {
		if cr := &p.cred[i]; !c.shared && cr.counted && cr.avail <= 0 {
			p.m.st.rndv.Inc()
			return true
		}
	}
	return false
}

// FragsInFlight implements core.Resources: the frames sent to the peer
// from send buffers whose send has not completed, and those waiting for
// the session or the frames before them. Injected frames are done when
// fi_tinjectdata returns.
func (p *peer) FragsInFlight() int { return p.frags + len(p.wait) }

// Replenished implements core.Resources: the module's count (send
// buffers and the provider's queue are the module's, and a count per
// peer would tell no more).
func (p *peer) Replenished() uint64 { return p.m.replenished }

// rmaPeer is the endpoint of a module whose provider can keep a FIN
// behind a Put (doc.go): the peer with Put and Get (core.RDMA). Without
// that promise the module hands out the peer alone, and the PML moves
// rendezvous data by its pipeline.
type rmaPeer struct{ *peer }

var _ core.RDMA = rmaPeer{}

// Put implements core.RDMA: an RDMA write, with FI_DELIVERY_COMPLETE
// where the provider takes it (doc.go: the FIN).
func (p rmaPeer) Put(op *core.RDMAOp) error { return p.rdma(op, true) }

// Get implements core.RDMA: an RDMA read.
func (p rmaPeer) Get(op *core.RDMAOp) error { return p.rdma(op, false) }

func (p *peer) rdma(op *core.RDMAOp, write bool) error {
	m := p.m
	switch {
	case m.closed:
		return errClosed
	case p.err != nil:
		return p.err
	}
	n := uint64(len(op.Local))
	if op.Offset > op.Remote.Len || n > op.Remote.Len-op.Offset {
		return fmt.Errorf("ofi: %d bytes at offset %d of a %d-byte remote region", n, op.Offset, op.Remote.Len)
	}
	var desc fabric.Desc
	if op.Region != nil {
		e, ok := op.Region.(*regEntry)
		if !ok || e.c.m != m || !e.covers(op.Local) {
			return fmt.Errorf("ofi: the local buffer is not within a registration of this module")
		}
		desc = e.mr.Desc
	} else if m.ep.Info.MRMode&fabric.MRLocal != 0 && n > 0 {
		return fmt.Errorf("ofi: %s needs the local buffer registered", m.ep.Info.Provider)
	}
	if n == 0 {
		m.ops.done = append(m.ops.done, op)
		return nil
	}
	slot := m.ops.take(op, p.rank)
	if slot < 0 {
		return errNoSlot
	}
	var err error
	ctx := ctxOf(kindRDMA, 0, slot)
	if write {
		err = m.ep.Write(op.Local, desc, p.addr, op.Remote.Addr+op.Offset, op.Remote.Key, ctx, m.writeFlags)
	} else {
		err = m.ep.Read(op.Local, desc, p.addr, op.Remote.Addr+op.Offset, op.Remote.Key, ctx)
	}
	if err != nil {
		m.ops.release(slot)
		if errors.Is(err, fabric.ErrAgain) {
			return errBusy
		}
		return fmt.Errorf("ofi: rdma to rank %d: %w", p.rank, err)
	}
	if write {
		p.ps.written.Add(int64(n))
	} else {
		p.ps.read.Add(int64(n))
	}
	return nil
}
