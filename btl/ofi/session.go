//go:build ofi && cgo

package ofi

import (
	"errors"
	"fmt"
	"time"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
	"github.com/gobtl/gobtl/core"
)

// The session machinery of auth.go over the endpoint: control messages
// out and in, the completions of everything, and lost peers.

// sendCtl sends a control message to p, with tok as its CQ data: by
// inject when it fits, else from a control send buffer; either way
// from memory outside Go's heap.
func (m *Module) sendCtl(p *peer, b []byte, tok uint64) error {
	if len(b) <= m.inject {
		s := m.scratch[:len(b)]
		copy(s, b)
		return m.ep.TInject(s, tok, p.addr, tagCtl)
	}
	return m.sendCtlTracked(p, b, tok)
}

// sendCtlTracked sends a control message from a control send buffer:
// its completion, or its error completion, comes back (a probe's must).
func (m *Module) sendCtlTracked(p *peer, b []byte, tok uint64) error {
	c := m.ctl
	i := c.getSend(p.rank)
	if i < 0 {
		return fabric.ErrAgain
	}
	sb := c.sbuf(i)[:len(b)]
	copy(sb, b)
	err := m.ep.TSend(sb, c.sdesc(), tok, p.addr, tagCtl, ctxOf(kindSend, classCtl, i))
	if err != nil {
		c.putSend(i)
	} else {
		p.inflight++
	}
	return err
}

// ctlErr handles a control message the provider refused: full queues
// are tried again later, anything else loses the peer.
func (p *peer) ctlErr(what string, err error) bool {
	if err == nil {
		return true
	}
	if !errors.Is(err, fabric.ErrAgain) {
		p.lose(fmt.Errorf("%s: %w", what, err))
	}
	return false
}

// dial opens the session to p: a hello, after which frames follow at
// once. A hello the provider cannot take now is sent again from
// Progress, frames waiting behind it.
func (p *peer) dial() {
	m := p.m
	nd := core.NewNonce()
	m.counter++
	proof, tok := makeHello(m.key, m.self, p.ident, m.counter, nd)
	encodeHello(p.helloMsg[:], m.rank, m.counter, (*[16]byte)(&nd), &proof)
	p.txTok, p.txSeq, p.tx = tok, 0, txHello
	m.st.handshakes.Inc()
	p.sendHello()
}

// sendHello sends the held hello; the session is up once it has left
// (frames after it stay after it: FI_ORDER_SAS).
func (p *peer) sendHello() {
	err := p.m.sendCtlTracked(p, p.helloMsg[:], 0)
	if p.ctlErr("hello", err) {
		p.tx, p.refusedAt = txUp, 0
		p.m.replenished++
		if len(p.wait) > 0 {
			p.m.wantFlush(p)
		}
	} else if errors.Is(err, fabric.ErrAgain) && p.remote {
		p.stuck()
	}
}

// tick runs p's timers: a hello the provider refused earlier.
func (p *peer) tick(now time.Duration) {
	if p.tx == txHello {
		p.sendHello()
	}
}

// onHello opens the session rank says it opens, if its proof holds: the
// frames that came before it, held as strays, are taken if they carry
// its token.
func (m *Module) onHello(msg *ctlMsg) {
	p, err := m.peer(msg.rank)
	if err != nil || p.err != nil {
		m.st.rejected.Inc()
		return
	}
	tok, why := checkHello(m.key, p.ident, m.self, msg.counter, msg.nd, msg.proof[:], &p.lastHello)
	if tok == 0 {
		m.st.rejected.Inc()
		m.log.Warn().Int("claimed_rank", p.rank).Str("why", why).Msg("a hello was refused")
		return
	}
	p.dropEarly()
	p.rxTok, p.rxSeq, p.byeSeen, p.heard = tok, 0, false, m.now
	if p.pub.host == m.live.host {
		m.unpacer.sessionUp(p.pub.name)
	}
	m.strays.adopt(m, p)
}

// complete handles one completion.
func (m *Module) complete(c *fabric.Completion) int {
	kind, class, idx := ctxParts(c.Context)
	switch kind {
	case kindRecv:
		q := m.class(class)
		if q == nil || idx >= q.n {
			return 0
		}
		switch class {
		case classCtl:
			return m.onCtl(idx, c)
		case classSink:
			// A tag none of the job's messages has: a foreign sender's.
			m.st.rejected.Inc()
			m.post(q, idx)
			return 0
		}
		return m.onFrame(q, idx, c)
	case kindSend:
		if q := m.class(class); q != nil && idx < len(q.sowner) {
			m.sent(q, idx)
		}
	case kindRDMA:
		m.ops.finish(m, idx, nil)
		return 1
	}
	return 0
}

// sender is the peer whose session a message claims to come from, or
// nil when its token is not that session's: checked before anything of
// the message is read but the sender's rank.
func (m *Module) sender(rank uint32, data uint64) *peer {
	if int64(rank) >= int64(m.size) {
		return nil
	}
	p := m.peers[rank]
	if p == nil || p.rxTok == 0 || tokenOf(data) != p.rxTok || p.err != nil {
		return nil
	}
	return p
}

// onFrame takes a frame that arrived in buffer i of c: from a session,
// delivered in the order its sender sent it. A provider may complete
// receives out of order (rxm's rendezvous for long messages completes
// after shorter ones sent later: comp_order is FI_ORDER_NONE), so a
// frame that comes early keeps its buffer until those before it came.
func (m *Module) onFrame(c *rxClass, i int, comp *fabric.Completion) int {
	comp.Tag = c.tag // an untagged class's completion has none
	if comp.Data&dataNoCredit != 0 {
		comp.Tag |= tagNoCredit
	}
	b := c.buf(i)[:min(comp.Len, c.size)]
	src, ok := frameSrc(b)
	p := m.sender(src, comp.Data)
	if !ok || p == nil {
		// Perhaps the frame of a session whose hello is late (it found no
		// control buffer and waits in the provider): held a while.
		if !ok || !m.strays.hold(m, c, i, len(b), comp, int64(src)) {
			m.st.rejected.Inc()
			m.post(c, i)
		}
		return 0
	}
	return m.inOrder(p, c, i, len(b), comp.Tag, uint16(comp.Data))
}

// inOrder delivers a frame of p's session with sequence number seq, and
// those held early behind it.
func (m *Module) inOrder(p *peer, c *rxClass, i, n int, tag uint64, seq uint16) int {
	p.heard = m.now
	if d := seq - p.rxSeq; d != 0 {
		p.holdEarly(c, i, n, tag, int(d))
		return 0
	}
	n = m.deliver(p, c, i, n, tag)
	for len(p.early) > 0 && p.err == nil && !m.closed {
		e := &p.early[int(p.rxSeq)&(len(p.early)-1)]
		if e.c == nil {
			break
		}
		ec, ei, en, et := e.c, e.idx, e.n, e.tag
		e.c = nil
		n += m.deliver(p, ec, int(ei), int(en), et)
	}
	if p.byeSeen && p.rxSeq == p.byeSeq {
		p.closed()
	}
	return n
}

// early is a frame that came before one sent ahead of it.
type early struct {
	c      *rxClass
	idx, n int32
	tag    uint64
}

// holdEarly keeps a frame d ahead of the next one. The sender cannot
// have more frames in flight than this module gave it credits (plus a
// margin for uncredited ones); a frame further ahead breaks the protocol.
func (p *peer) holdEarly(c *rxClass, i, n int, tag uint64, d int) {
	m := p.m
	if p.early == nil {
		w := 64
		for _, x := range m.me.window {
			w += x
			if x == 0 { // a class without credits bounds nothing
				w = 1 << 15
				break
			}
		}
		size := 1
		for size < w {
			size *= 2
		}
		p.early = make([]early, min(size, 1<<15))
	}
	e := &p.early[(int(p.rxSeq)+d)&(len(p.early)-1)]
	if d >= len(p.early) || e.c != nil {
		m.post(c, i)
		m.st.badFrames.Inc()
		p.lose(fmt.Errorf("a frame %d ahead of the next one in order", d))
		return
	}
	*e = early{c: c, idx: int32(i), n: int32(n), tag: tag}
}

// dropEarly gives back the buffers of frames held early (a new session,
// a lost peer).
func (p *peer) dropEarly() {
	for i := range p.early {
		if e := &p.early[i]; e.c != nil {
			p.m.post(e.c, int(e.idx))
			e.c = nil
		}
	}
}

// deliver checks and hands on the next frame in order from p.
func (m *Module) deliver(p *peer, c *rxClass, i, n int, tag uint64) int {
	p.rxSeq++
	b := c.buf(i)[:n]
	h := &m.hdr
	err := h.Decode(b, m.lim)
	if err == nil && (int(h.Src) != p.rank || core.HeaderSize+int(h.Length) != len(b)) {
		err = &core.FrameError{Peer: p.rank, Field: "src/length", Value: uint64(h.Src),
			Reason: fmt.Sprintf("%d-byte frame in rank %d's session", len(b), p.rank)}
	}
	if err == nil {
		if h.Credits > 0 {
			p.grant(c.idx, int(h.Credits))
		}
		err = m.hs.Dispatch(h, b[core.HeaderSize:])
	}
	if m.closed {
		return 1
	}
	m.post(c, i)
	if err != nil {
		m.st.badFrames.Inc()
		p.lose(err)
		return 0
	}
	m.st.framesRecv.Inc()
	if tag&tagNoCredit == 0 {
		p.owe(c)
	}
	return 1
}

// onCtl handles a control message: the handshake's from anyone, the
// session's only with the sender's token.
func (m *Module) onCtl(i int, comp *fabric.Completion) int {
	msg, err := decodeCtl(m.ctl.buf(i)[:min(comp.Len, ctlBufSize)], m.size)
	m.post(m.ctl, i)
	if err != nil || msg.rank == m.rank {
		m.st.rejected.Inc()
		return 0
	}
	if msg.op == opHello {
		m.onHello(&msg)
		return 1
	}
	p := m.sender(uint32(msg.rank), comp.Data)
	if p == nil {
		m.st.rejected.Inc()
		return 0
	}
	p.heard = m.now
	switch msg.op {
	case opCredit:
		for ci := range min(msg.nclass, len(p.cred)) {
			if msg.credits[ci] > 0 {
				p.grant(ci, int(msg.credits[ci]))
			}
		}
	case opBye:
		p.byeSeq, p.byeSeen = msg.seq, true
		if p.rxSeq == msg.seq {
			p.closed()
		}
	case opDrop:
		p.lose(fmt.Errorf("rank %d disconnected from this rank", p.rank))
	}
	return 1
}

// cqError handles an error completion: a send or RDMA operation that
// failed loses its peer (the provider could not reach it), a receive
// buffer that took a message too long for it is posted again.
func (m *Module) cqError() int {
	ce, ok := m.ep.ReadErr()
	if !ok {
		return 0
	}
	kind, class, idx := ctxParts(ce.Context)
	switch kind {
	case kindRecv:
		if q := m.class(class); q != nil && idx < q.n && !errors.Is(ce.Err, fabric.ErrCanceled) {
			m.st.rejected.Inc()
			m.post(q, idx)
		}
	case kindSend:
		q := m.class(class)
		if q == nil || idx >= len(q.sowner) {
			return 0
		}
		if p := m.sent(q, idx); p != nil {
			p.lose(fmt.Errorf("send: %w", &ce))
		}
	case kindRDMA:
		m.ops.finish(m, idx, &ce)
	}
	return 1
}

// sent takes back send buffer idx of q, whose send completed, and
// returns the peer it went to.
func (m *Module) sent(q *rxClass, idx int) *peer {
	q.putSend(idx)
	m.replenished++
	p := m.peers[q.sowner[idx]]
	if p != nil {
		p.inflight--
		if q != m.ctl {
			p.frags--
		}
	}
	return p
}

// grant adds credits the peer returned on class ci.
func (p *peer) grant(ci, n int) {
	p.cred[ci].avail += n
	p.m.replenished++
	if len(p.wait) > 0 {
		p.m.wantFlush(p)
	}
}

// refused notes a frame refused for lack of a credit on class ci.
func (p *peer) refused(ci int) {
	if !p.cred[ci].held {
		p.cred[ci].held = true
		p.m.st.stalls.Inc()
	}
}

// owe records a credit owed to p for a buffer of c reposted.
func (p *peer) owe(c *rxClass) {
	if c.window == 0 {
		return
	}
	p.owed[c.idx]++
	if !p.due && p.owed[c.idx] >= c.low {
		p.due, p.dueGen = true, p.m.gen
		p.m.credDue = append(p.m.credDue, p)
	}
}

// returnCredits sends explicit credit messages to the peers owed a
// class's threshold since an earlier Progress: a frame the application
// sends in answer carries them instead, if it comes before.
func (m *Module) returnCredits() {
	keep := m.credDue[:0]
	for _, p := range m.credDue {
		if p.err != nil {
			p.due = false
			continue
		}
		if !p.creditsDue() {
			p.due = false
			continue
		}
		if p.dueGen == m.gen || !p.sendCredits() {
			keep = append(keep, p)
			continue
		}
		p.due = false
	}
	clear(m.credDue[len(keep):])
	m.credDue = keep
}

// creditsDue reports whether some class's threshold is owed.
func (p *peer) creditsDue() bool {
	for i, c := range p.m.classes {
		if p.owed[i] >= c.low {
			return true
		}
	}
	return false
}

// sendCredits sends every owed credit in one message; it reports false
// when it must be tried again (no session yet, a full queue).
func (p *peer) sendCredits() bool {
	if p.tx != txUp {
		if p.tx == txIdle {
			p.dial()
		}
		return false
	}
	var cr [maxClasses]uint16
	for i := range p.owed {
		cr[i] = uint16(min(p.owed[i], 0xffff))
	}
	var b [ctlBufSize]byte
	n := encodeCredits(b[:], p.m.rank, cr[:len(p.owed)])
	if !p.ctlErr("credits", p.m.sendCtl(p, b[:n], cqData(p.txTok, 0))) {
		return false
	}
	for i := range p.owed {
		p.owed[i] -= int(cr[i])
	}
	p.m.st.creditMsgs.Inc()
	return true
}

// lose marks p lost, once: every later operation fails with ErrPeerLost,
// its RDMA in flight fails, frames waiting for it are dropped, and the
// next Progress reports it.
func (p *peer) lose(cause error) {
	if p.err != nil {
		return
	}
	m := p.m
	p.err = fmt.Errorf("ofi %s: rank %d: %w: %v", m.attrs.Name, p.rank, core.ErrPeerLost, cause)
	m.st.lost.Inc()
	m.log.Warn().Int("peer", p.rank).Err(cause).Msg("peer lost")
	p.drop()
	m.ops.failPeer(m, p.rank, p.err)
	m.toTell = append(m.toTell, p)
}

// closed ends p after its goodbye: later operations fail with
// ErrPeerLost, but the peer is not reported lost.
func (p *peer) closed() {
	if p.err != nil {
		return
	}
	p.err = fmt.Errorf("ofi %s: rank %d closed its endpoint: %w", p.m.attrs.Name, p.rank, core.ErrPeerLost)
	p.drop()
	p.m.ops.failPeer(p.m, p.rank, p.err)
}

// drop releases the frames waiting for p.
func (p *peer) drop() {
	for _, w := range p.wait {
		w.c.putSend(w.buf)
	}
	p.m.replenished += uint64(len(p.wait))
	p.wait = nil
	if !p.m.closed {
		p.dropEarly()
	}
	p.m.live.forget(p)
}

// Disconnect implements core.Module: a session's peer is told with a
// drop, which makes it report this rank lost, and is lost here from now
// on. A drop the provider cannot take now is sent again from
// housekeeping (Disconnect itself makes no progress: it may be called
// outside Progress); a peer with no session yet has heard nothing from
// this rank to wait on.
func (m *Module) Disconnect(rank int, reason error) {
	if m.closed || rank < 0 || rank >= m.size || rank == m.rank {
		return
	}
	p := m.peers[rank]
	if p == nil || p.err != nil {
		return
	}
	p.dropOwed = p.tx == txUp && !p.procGone()
	p.lose(fmt.Errorf("disconnected by this rank: %v", reason))
	p.sendDrop()
}

// sendDrop sends the drop Disconnect owes p, unless the provider's queue
// is full: then housekeeping tries again.
func (p *peer) sendDrop() {
	if !p.dropOwed {
		return
	}
	var b [ctlBufSize]byte
	putCtl(b[:], opDrop, p.m.rank)
	if err := p.m.sendCtl(p, b[:ctlHdr], cqData(p.txTok, 0)); !errors.Is(err, fabric.ErrAgain) {
		p.dropOwed = false
	}
}

// goodbye tells every peer with a session that this module closes, and
// gives the messages a moment to leave (a provider that progresses only
// when called holds them until then).
func (m *Module) goodbye() {
	var b [ctlBufSize]byte
	sent := 0
	for _, p := range m.peers {
		if p == nil || p.err != nil || p.tx != txUp || p.procGone() {
			continue
		}
		n := encodeBye(b[:], m.rank, p.txSeq)
		for try := 0; try < 100; try++ {
			err := m.sendCtl(p, b[:n], cqData(p.txTok, 0))
			if !errors.Is(err, fabric.ErrAgain) {
				if err == nil {
					sent++
				}
				break
			}
			m.drainSends()
		}
	}
	if sent == 0 {
		return
	}
	deadline := m.clock.Now() + 100*time.Millisecond
	for m.clock.Now() < deadline && m.ctl.inFlight() > 0 {
		m.drainSends()
	}
	// Let a provider that progresses only when called push what it
	// injected.
	for range 10 {
		m.drainSends()
	}
}

// drainSends reads the CQ at close: send buffers come back, the rest is
// dropped (nobody is listening any more).
func (m *Module) drainSends() {
	k, err := m.ep.Poll(m.comp[:])
	if errors.Is(err, fabric.ErrAvail) {
		m.ep.ReadErr()
	}
	for i := range k {
		if kind, class, idx := ctxParts(m.comp[i].Context); kind == kindSend {
			if q := m.class(class); q != nil && idx < len(q.sowner) {
				q.putSend(idx)
			}
		}
	}
}

// inFlight is how many of c's send buffers are in flight.
func (c *rxClass) inFlight() int { return len(c.sowner) - len(c.sfree) }

// strays are frames whose token no session holds yet, kept a short while
// in their buffers: the frames of a session whose hello the provider
// completes after them (it found every control buffer taken and waits as
// an unexpected message). Few are kept, per claimed rank and in all, for
// a bounded time, so that a process outside the job sending garbage in a
// rank's name holds a few buffers for a moment and no more.
type strays struct {
	held []stray
}

type stray struct {
	c    *rxClass
	idx  int
	n    int
	tag  uint64
	data uint64
	src  int
	at   time.Duration
}

const (
	straysMax     = 64
	straysPerRank = 16
	strayTime     = time.Second
)

// hold keeps a frame claimed from src, if there is room.
func (s *strays) hold(m *Module, c *rxClass, i, n int, comp *fabric.Completion, src int64) bool {
	if src < 0 || src >= int64(m.size) || len(s.held) >= min(straysMax, max(c.n/4, 2)) {
		return false
	}
	k := 0
	for _, h := range s.held {
		if h.src == int(src) {
			k++
		}
	}
	if k >= straysPerRank {
		return false
	}
	s.held = append(s.held, stray{c: c, idx: i, n: n, tag: comp.Tag, data: comp.Data, src: int(src), at: m.now})
	return true
}

// adopt takes p's strays that carry its new session's token, in order,
// and gives back the buffers of the others.
func (s *strays) adopt(m *Module, p *peer) {
	if len(s.held) == 0 {
		return
	}
	var mine []stray
	keep := s.held[:0]
	for _, h := range s.held {
		switch {
		case h.src != p.rank:
			keep = append(keep, h)
		case tokenOf(h.data) == p.rxTok:
			mine = append(mine, h)
		default:
			m.st.rejected.Inc()
			m.post(h.c, h.idx)
		}
	}
	s.held = keep
	for _, h := range mine {
		if p.err != nil || m.closed {
			m.post(h.c, h.idx)
			continue
		}
		m.inOrder(p, h.c, h.idx, h.n, h.tag, uint16(h.data))
	}
}

// expire gives back the buffers of strays held too long.
func (s *strays) expire(m *Module, now time.Duration) {
	keep := s.held[:0]
	for _, h := range s.held {
		if now-h.at < strayTime {
			keep = append(keep, h)
			continue
		}
		m.st.rejected.Inc()
		m.post(h.c, h.idx)
	}
	s.held = keep
}
