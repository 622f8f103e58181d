package pml

import (
	"errors"
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml/internal/list"
	"github.com/gobtl/gobtl/pml/internal/pool"
)

// Rendezvous protocols (seed 004 §3–4). The sender picks the protocol; the
// message may carry its first bytes inline in RNDV_START.
//
//	rdma_write: START → REPLY(receiver keys) → RDMA write → FIN per subchannel
//	rdma_read:  START(sender keys) → receiver RDMA read → FIN after the read completes
//	pipeline:   START → REPLY(ack) → FRAG ... (copy-in/copy-out, no RDMA)
//
// rdma_read_async is rdma_read with the START and the read completions
// solicited, so an armed receiver's event thread makes progress while the
// application computes (async.go).

// rendezvous runs the rendezvous protocols for the engine that holds it
// (engine.rndv): the START a large send begins with and the receive it
// matches, the REPLY, the RDMA data (write, read, read with events) cut
// into stripes by the scheduler and counted down by the completion
// filter, the FIN, and the copy-in/copy-out pipeline's fragments. Its own
// state is the pipeline's pump list, the completion filter's message ids
// and the pools of stripes and rendezvous states; the requests, the
// frames it sends and the peers it fails are the engine's (e), and its
// methods run under the engine lock.
type rendezvous struct {
	e *engine
	// pumps are the pipelined sends with fragments to go, in the order
	// their replies came; pumpRound counts pump calls (sub.pumpReady).
	pumps     list.List[Request]
	pumpRound uint64
	// msgSeq is the last message id given to the scheduling policy's
	// stripe events.
	msgSeq  uint64
	stripes pool.Pool[stripe]
	states  pool.Pool[rdmaState]
}

// rdma reports whether the protocol moves its data by RDMA (the RDMA set
// of a subchannel: core.RDMA with the module's core.Registrar).
func (p Protocol) rdma() bool { return p == ProtoRead || p == ProtoReadAsync || p == ProtoWrite }

// region returns r.buf registered with s's module, registering it once per
// module (several subchannels may share one).
func (rv *rendezvous) region(r *Request, s *sub, acc core.Access) (core.Region, error) {
	reg := s.mod.reg
	if reg == nil {
		return nil, nil
	}
	x := rv.state(r)
	free := -1
	for i := range x.regMods {
		if x.regMods[i] == reg {
			return x.regs[i], nil
		}
		if x.regMods[i] == nil && free < 0 {
			free = i
		}
	}
	rg, err := reg.RegisterMem(r.buf, acc)
	if err != nil {
		return nil, fmt.Errorf("pml: register %d bytes with %s: %w", len(r.buf), s.mod.attrs.Name, err)
	}
	x.regs[free], x.regMods[free] = rg, reg
	return rg, nil
}

// keysFor registers r.buf on every subchannel of p that offers RDMA and
// returns their keys.
func (rv *rendezvous) keysFor(r *Request, p *peer, acc core.Access, keys *[maxSubchannels]keyRef) (int, error) {
	n := 0
	for _, s := range p.subchannels() {
		if s.rdma == nil {
			continue
		}
		rg, err := rv.region(r, s, acc)
		if err != nil {
			return 0, err
		}
		var k core.MemKey
		if rg != nil {
			k = rg.Key()
		}
		keys[n] = keyRef{sub: s.idx, key: k}
		n++
	}
	return n, nil
}

// begin sends RNDV_START for a message too large for eager on s.
func (rv *rendezvous) begin(r *Request, p *peer, s *sub) {
	proto := rv.e.opts.Protocol
	var keys [maxSubchannels]keyRef
	nkeys := 0
	var startFlags byte
	if proto.rdma() {
		fits, choose := p.rdmaFits(len(r.buf), p.rndvInFlight(), r.exchange)
		switch {
		case !fits:
			// No subchannel moves this size better by RDMA (or at all).
			proto = ProtoPipeline
		case proto != ProtoWrite:
			// rdma_read: the keys travel in the START. (rdma_write
			// registers the source when the REPLY comes.)
			var err error
			if nkeys, err = rv.keysFor(r, p, core.AccessRemoteRead|core.AccessLocalWrite, &keys); err != nil {
				rv.e.log.Debug().Err(err).Msg("registration failed; using the pipeline")
				proto, nkeys = ProtoPipeline, 0
			} else if choose && proto == ProtoRead {
				// The receiver takes RDMA or the pipeline (choose.go);
				// a REPLY says it took the pipeline.
				startFlags = startChoose
				rv.state(r).offered = true
			}
		}
	}
	r.proto = proto
	p.rndvBegan() // complete takes it back
	r.total = len(r.buf)
	inline := min(s.inline, len(r.buf))
	r.got = inline
	if proto == ProtoPipeline {
		rv.e.m.pipelineSends.Inc()
	} else {
		rv.e.m.rndvSends.Inc()
	}
	h := core.Header{Type: core.TypeRndvStart, Context: r.ctx, Tag: int32(r.tag), PSN: p.nextPSN()}
	p.tookPSN()
	n := encodeStart(rv.e.scratch[:], uint64(r.total), r.id(), proto, keys[:nkeys], inline, startFlags)
	var flags core.SendFlags
	if proto == ProtoReadAsync {
		flags = core.SendSolicited
	}
	rv.e.sendFrame(p, s, h, rv.e.scratch[:n], r.buf[:inline], flags, nil)
	if proto == ProtoReadAsync && rv.e.async != nil {
		rv.e.async.arm() // the receiver reads while the sender computes (async.go)
	}
}

// rdmaFits reports whether some subchannel can move size bytes by RDMA
// and prefers to, with inflight other rendezvous sends to the
// peer under way: by its mechanism table (Attrs.Mech) where it has one,
// else by its Attrs.RDMAMin/RDMAMax window; an exchange's message by its
// MechExchange table where it has one. choose: the rule that allows RDMA
// lets the receiver choose the pipeline instead (core.MechRule.Choose),
// and the peer is reached by one subchannel alone, so that the choice
// measures one way of moving data for each mechanism.
func (p *peer) rdmaFits(size, inflight int, exchange bool) (fits, choose bool) {
	for _, s := range p.subchannels() {
		a := &s.mod.attrs
		if s.rdma == nil {
			continue
		}
		if mech := mechOf(a, exchange); mech != nil {
			if rule := mech.Lookup(int64(size)); rule != nil && rule.UseRDMA(inflight) {
				return true, rule.Choose && len(p.subchannels()) == 1
			}
			continue
		}
		if int64(size) >= a.RDMAMin && (a.RDMAMax == 0 || int64(size) <= a.RDMAMax) {
			return true, false
		}
	}
	return false, false
}

// mechOf is a's mechanism table for a message one way or, if exchange,
// for an exchange's.
func mechOf(a *core.Attrs, exchange bool) core.MechTable {
	if exchange && a.MechExchange != nil {
		return a.MechExchange
	}
	return a.Mech
}

// sendFin sends a FIN naming the peer's request id on s (or any
// subchannel when s is nil).
func (rv *rendezvous) sendFin(p *peer, s *sub, req, bytes uint64, status uint32) {
	if s == nil {
		s = p.pickSmall()
	}
	n := encodeFin(rv.e.scratch[:], req, bytes, status)
	rv.e.sendFrame(p, s, core.Header{Type: core.TypeRndvFin}, rv.e.scratch[:n], nil, 0, nil)
}

// matched continues a receive matched with a RNDV_START.
func (rv *rendezvous) matched(r *Request, h *core.Header, m *startMsg) {
	p := rv.e.chans.get(int(h.Src))
	r.matched(int(h.Src), h.Tag, int(m.total))
	r.remote = m.sreq
	r.proto = m.proto
	r.got = copy(r.buf[:r.accept], m.inline)
	if r.got == r.accept {
		// Everything that fits came inline (a truncated or tiny message).
		rv.sendFin(p, nil, r.remote, uint64(r.got), finOK)
		rv.finishRecv(r, nil)
		return
	}
	if m.choose && m.proto == ProtoRead && !rv.chooseRDMA(r, p) {
		r.proto = ProtoPipeline
		m.proto = ProtoPipeline
	}
	switch m.proto {
	case ProtoRead, ProtoReadAsync:
		var keys [maxSubchannels]core.MemKey
		have, ok := rv.peerKeys(p, m.keys[:m.nkeys], "start.key", &keys)
		if !ok {
			return
		}
		rv.rdmaData(r, p, true, &keys, have, m.proto == ProtoReadAsync)
	case ProtoWrite:
		var keys [maxSubchannels]keyRef
		nkeys, err := rv.keysFor(r, p, core.AccessRemoteWrite|core.AccessLocalWrite, &keys)
		if err != nil || nkeys == 0 {
			if err == nil {
				err = fmt.Errorf("pml: rank %d chose rdma_write but no subchannel can take a put", r.src)
			}
			rv.sendFin(p, nil, r.remote, 0, finFailed)
			rv.finishRecv(r, err)
			return
		}
		n := encodeReply(rv.e.scratch[:], r.remote, r.id(), uint64(r.accept), keys[:nkeys])
		rv.e.sendFrame(p, p.pickSmall(), core.Header{Type: core.TypeRndvReply}, rv.e.scratch[:n], nil, 0, nil)
	case ProtoPipeline:
		n := encodeReply(rv.e.scratch[:], r.remote, r.id(), uint64(r.accept), nil)
		rv.e.sendFrame(p, p.pickSmall(), core.Header{Type: core.TypeRndvReply}, rv.e.scratch[:n], nil, 0, nil)
	}
}

// peerKeys files the memory keys p sent (in the frame field named field)
// by subchannel and returns which subchannels have one. A key for a
// subchannel this rank does not have is a bad frame: it fails p and
// reports false.
func (rv *rendezvous) peerKeys(p *peer, refs []keyRef, field string, keys *[maxSubchannels]core.MemKey) (have uint8, ok bool) {
	for _, k := range refs {
		if k.sub >= len(p.subchannels()) {
			src := int32(p.rank)
			rv.e.badFrame(src, badFrame(src, field, uint64(k.sub), "no such subchannel"))
			return 0, false
		}
		keys[k.sub], have = k.key, have|1<<k.sub
	}
	return have, true
}

// chooseRDMA chooses whether r, offered by rdma_read or the pipeline,
// moves by RDMA, by what p's earlier messages of its size took (choose.go),
// and notes when, for finishRecv to tell the choice how long the data
// took. Where p is reached by several subchannels (a stack that differs
// from the sender's) the offer stands.
func (rv *rendezvous) chooseRDMA(r *Request, p *peer) bool {
	if len(p.subchannels()) != 1 {
		return true
	}
	x := rv.state(r)
	x.chooser, x.chosen = p.chooser(), rv.e.opts.Clock.Now()
	return x.chooser.choose(r.accept, x.chosen)
}

func (rv *rendezvous) finishRecv(r *Request, err error) {
	if x := r.x; x != nil && x.chooser != nil && err == nil {
		x.chooser.done(r.accept, r.proto != ProtoPipeline, rv.e.opts.Clock.Now()-x.chosen)
		x.chooser = nil
	}
	r.status.Count = r.got
	rv.e.m.bytesRecv.Add(int64(r.got))
	if err == nil {
		err = rv.e.truncErr(r)
	}
	rv.e.complete(r, err)
}

// rdmaData moves [r.got, r.accept) of r by RDMA: gets on the receiver
// (rdma_read, get) or puts on the sender (rdma_write), striped by the
// scheduler.
func (rv *rendezvous) rdmaData(r *Request, p *peer, get bool, keys *[maxSubchannels]core.MemKey, have uint8, solicited bool) {
	var spans [maxSubchannels]span
	n := p.plan(keys, have, r.got, r.accept-r.got, &spans)
	if n == 0 {
		err := fmt.Errorf("pml: rank %d: no subchannel can carry the %v data", p.rank, r.proto)
		if r.kind == reqRecv {
			rv.sendFin(p, nil, r.remote, 0, finFailed)
			rv.finishRecv(r, err)
		} else {
			rv.sendFin(p, nil, r.remote, 0, finFailed)
			rv.e.complete(r, err)
		}
		return
	}
	x := rv.state(r)
	if x.msgID == 0 {
		rv.msgSeq++
		x.msgID = rv.msgSeq
	}
	acc := core.AccessLocalWrite
	if !get {
		acc |= core.AccessRemoteRead
	}
	// Count every operation before issuing any: a module may complete an
	// operation inside a later Put or Get call's Progress.
	var ops [maxSubchannels]int
	for i := 0; i < n; i++ {
		sp := spans[i]
		ops[i] = 1
		if m := sp.sub.maxRDMA; m > 0 && int64(sp.len) > m {
			ops[i] = int((int64(sp.len) + m - 1) / m)
		}
		x.stripes += ops[i]
		r.refs += ops[i]
		x.subs |= 1 << sp.sub.idx
	}
	for i := 0; i < n; i++ {
		sp := spans[i]
		rg, err := rv.region(r, sp.sub, acc)
		chunk := sp.len
		if ops[i] > 1 {
			chunk = int(sp.sub.maxRDMA)
		}
		for off := sp.off; off < sp.off+sp.len; off += chunk {
			l := min(chunk, sp.off+sp.len-off)
			st := rv.stripes.Get()
			st.rv, st.req, st.peer, st.sub, st.get = rv, r, p, sp.sub, get
			st.op = core.RDMAOp{Local: r.buf[off : off+l], Region: rg, Remote: keys[sp.sub.idx], Offset: uint64(off), Solicited: solicited, Done: st}
			rv.e.m.stripes.Inc()
			if err != nil {
				rv.stripeDone(st, err)
				continue
			}
			rv.issue(st)
		}
	}
}

// stripeDone is the completion filter (seed 001 §5.3): it counts a
// message's stripes down and reports the message once, and it feeds each
// stripe's delivery time to the scheduling policy.
func (rv *rendezvous) stripeDone(st *stripe, err error) {
	r, p := st.req, st.peer
	x := r.x
	if err != nil && x.failed == nil {
		x.failed = err
	}
	if err == nil {
		x.perSub[st.sub.idx] += len(st.op.Local)
		x.subEnd[st.sub.idx] = rv.e.opts.Clock.Now()
	}
	x.stripes--
	r.refs--
	st.req, st.peer, st.sub, st.op = nil, nil, nil, core.RDMAOp{}
	rv.stripes.Put(st)
	if x.stripes > 0 {
		return
	}
	if r.done {
		rv.e.maybeRecycle(r)
		return
	}
	if x.failed == nil && rv.e.opts.Scheduler != nil {
		p.stripesDone(x)
	}
	if r.kind == reqRecv {
		// rdma_read: FIN only after every read has completed (seed 004 §4.2).
		if x.failed != nil {
			rv.sendFin(p, nil, r.remote, 0, finFailed)
			rv.finishRecv(r, fmt.Errorf("pml: rdma read from rank %d: %w", r.src, x.failed))
			return
		}
		r.got = r.accept
		rv.sendFin(p, nil, r.remote, uint64(r.accept), finOK)
		rv.finishRecv(r, nil)
		return
	}
	// rdma_write: one FIN on every subchannel that carried data.
	if x.failed != nil {
		rv.sendFin(p, nil, r.remote, 0, finFailed)
		rv.e.complete(r, fmt.Errorf("pml: rdma write to rank %d: %w", r.peer, x.failed))
		return
	}
	for _, s := range p.subchannels() {
		if x.subs&(1<<s.idx) != 0 {
			rv.sendFin(p, s, r.remote, uint64(x.perSub[s.idx]), finOK)
		}
	}
	rv.e.m.bytesSent.Add(int64(r.accept))
	rv.e.complete(r, nil)
}

// unknownRequest handles a control frame from p naming no request that
// waits for it: a bad frame, unless p is already lost, when it is one
// still in flight for a request failPeer has failed.
func (rv *rendezvous) unknownRequest(p *peer, field string, id uint64, why string) {
	if p.failed() == nil {
		src := int32(p.rank)
		rv.e.badFrame(src, badFrame(src, field, id, why))
	}
}

func (rv *rendezvous) onReply(h *core.Header, payload []byte) {
	var m replyMsg
	if err := m.decode(h.Src, payload); err != nil {
		rv.e.badFrame(h.Src, err)
		return
	}
	p := rv.e.chans.get(int(h.Src))
	r := rv.e.lookup(m.sreq, reqSend)
	if r == nil || r.peer != int(h.Src) || r.remote != 0 {
		rv.unknownRequest(p, "reply.request", m.sreq, "no rendezvous waits for this reply")
		return
	}
	if m.accept > uint64(r.total) || m.accept <= uint64(r.got) {
		rv.e.badFrame(h.Src, badFrame(h.Src, "reply.accept", m.accept, fmt.Sprintf("want between %d and %d", r.got+1, r.total)))
		return
	}
	r.remote, r.accept = m.rreq, int(m.accept)
	if r.proto == ProtoRead && r.x != nil && r.x.offered && m.nkeys == 0 {
		// The receiver chose the pipeline over the offered read.
		r.proto = ProtoPipeline
		rv.e.m.rndvSends.Add(-1)
		rv.e.m.pipelineSends.Inc()
		rv.e.m.declined.Inc()
	}
	switch r.proto {
	case ProtoWrite:
		var keys [maxSubchannels]core.MemKey
		have, ok := rv.peerKeys(p, m.keys[:m.nkeys], "reply.key", &keys)
		if !ok {
			return
		}
		rv.rdmaData(r, p, false, &keys, have, false)
	case ProtoPipeline:
		rv.startPump(r)
	default:
		rv.e.badFrame(h.Src, badFrame(h.Src, "reply.request", m.sreq, fmt.Sprintf("a %v rendezvous takes no reply", r.proto)))
	}
}

func (rv *rendezvous) onFin(h *core.Header, payload []byte) {
	var m finMsg
	if err := m.decode(h.Src, payload); err != nil {
		rv.e.badFrame(h.Src, err)
		return
	}
	p := rv.e.chans.get(int(h.Src))
	if r := rv.e.lookup(m.req, reqSend); r != nil && r.peer == int(h.Src) {
		// FIN to a sender: rdma_read done, or the receiver needed nothing
		// more than the inline bytes, or it failed.
		if m.status != finOK {
			rv.e.complete(r, fmt.Errorf("pml: rank %d failed the rendezvous: %w", p.rank, core.ErrPeerLost))
			return
		}
		rv.e.m.bytesSent.Add(int64(r.total))
		rv.e.complete(r, nil)
		return
	}
	r := rv.e.lookup(m.req, reqRecv)
	if r == nil || r.src != int(h.Src) || r.proto != ProtoWrite {
		rv.unknownRequest(p, "fin.request", m.req, "no rendezvous waits for this FIN")
		return
	}
	if m.status != finOK {
		rv.finishRecv(r, fmt.Errorf("pml: rank %d failed the rdma_write rendezvous: %w", p.rank, core.ErrPeerLost))
		return
	}
	if uint64(r.got)+m.bytes > uint64(r.accept) {
		rv.e.badFrame(h.Src, badFrame(h.Src, "fin.bytes", m.bytes, "more bytes than the receiver accepted"))
		return
	}
	r.got += int(m.bytes)
	if r.got == r.accept {
		rv.finishRecv(r, nil)
	}
}

func (rv *rendezvous) onFrag(h *core.Header, payload []byte) {
	if len(payload) < fragFixed {
		rv.e.badFrame(h.Src, badFrame(h.Src, "frag.length", uint64(len(payload)), "shorter than a FRAG"))
		return
	}
	rreq := le64(payload[0:])
	off := le64(payload[8:])
	data := payload[fragFixed:]
	r := rv.e.lookup(rreq, reqRecv)
	if r == nil || r.src != int(h.Src) || r.proto != ProtoPipeline {
		rv.unknownRequest(rv.e.chans.get(int(h.Src)), "frag.request", rreq, "no pipeline waits for this fragment")
		return
	}
	if off+uint64(len(data)) > uint64(r.accept) {
		rv.e.badFrame(h.Src, badFrame(h.Src, "frag.offset", off, fmt.Sprintf("fragment of %d bytes beyond the %d accepted", len(data), r.accept)))
		return
	}
	copy(r.buf[off:], data)
	r.got += len(data)
	if r.got == r.accept {
		rv.finishRecv(r, nil)
	}
}

// startPump begins sending a pipeline's fragments. The pump list holds a
// reference to r like a queued frame does: failPeer may complete r while
// it waits there, and the user release it, and it must not be recycled
// before pump lets go of it. Sends pump in the order their replies came,
// so that the fragments a window of them waits for go to the oldest
// first, which the user's Waitall waits on first.
func (rv *rendezvous) startPump(r *Request) {
	rv.pumps.PushBack(&r.link, r)
	r.refs++
	rv.e.pendingWork++
	rv.pump()
}

// pump sends pipeline fragments until the modules push back. A refusal
// blocks its subchannel (pumpReady): the sends behind it on the list
// would meet the same refusal, and so would the next poll's, until the
// endpoint has taken a fragment back.
func (rv *rendezvous) pump() int {
	n := 0
	rv.pumpRound++
	for k := rv.pumps.Front(); k != nil; {
		next := k.Next()
		r := k.Value()
		p := rv.e.chans.get(r.peer)
		for !r.done && r.got < r.accept && p.failed() == nil {
			s := p.pickSmall()
			if !s.pumpReady(rv.pumpRound) {
				break
			}
			frag, depth := s.mod.attrs.MaxSendSize, 0
			if rule := mechOf(&s.mod.attrs, r.exchange).Lookup(int64(r.accept)); rule != nil {
				if rule.Frag > 0 {
					frag = min(rule.Frag, frag)
				}
				depth = rule.Depth
			}
			if depth > 0 {
				if s.credited != nil && s.credited.FragsInFlight() >= depth {
					break // the receiver has enough to copy out; more would leave the cache
				}
			}
			chunk := min(fragChunk(frag, r.accept), r.accept-r.got)
			nh := encodeFragHdr(rv.e.scratch[:], r.remote, uint64(r.got))
			s.mod.armed = true
			err := s.ep.Send(core.Header{Type: core.TypeFrag, Src: int32(rv.e.rank)}, rv.e.scratch[:nh], r.buf[r.got:r.got+chunk], 0)
			if err != nil {
				if !errors.Is(err, core.ErrNoResources) {
					rv.e.failPeer(p, err)
				} else {
					s.pumpRefused(rv.pumpRound)
				}
				break
			}
			r.got += chunk
			n++
		}
		if r.done || r.got == r.accept || p.failed() != nil {
			rv.pumps.Remove(k)
			r.refs--
			rv.e.pendingWork--
			if r.done {
				rv.e.maybeRecycle(r)
			} else {
				rv.e.m.bytesSent.Add(int64(r.accept))
				rv.e.complete(r, nil)
			}
		}
		k = next
	}
	return n
}

// pumpReady reports whether the pump may offer s a fragment in this
// round: not if s refused one earlier in the round, nor after that while
// its endpoint's Replenished count stands where the refusal left it. An
// endpoint that cannot tell (no core.Resources) is asked again at the
// next round, that is, at the next poll.
func (s *sub) pumpReady(round uint64) bool {
	switch {
	case !s.pumpBlocked:
		return true
	case s.blockedRound == round:
		return false
	case s.credited != nil && s.credited.Replenished() == s.blockedGen:
		s.blockedRound = round
		return false
	}
	s.pumpBlocked = false
	return true
}

// pumpRefused notes that s refused a pipeline fragment in this round.
func (s *sub) pumpRefused(round uint64) {
	s.pumpBlocked, s.blockedRound = true, round
	if s.credited != nil {
		s.blockedGen = s.credited.Replenished()
	}
}

// fragChunk is the data one pipeline fragment of a total-byte message
// carries. Up to eight fragments' worth it is the largest power of two
// that fits beside the fragment header: a medium message then has several
// fragments in flight, so that the receiver's copy-out overlaps the
// sender's copy-in, and power-of-two sizes leave no small tail. A longer
// message fills each fragment (to a cache-line multiple): with sm's 64 KiB
// max_send_size that is 17 frames per MiB instead of 32 — half the
// frames, descriptors and pipeline steps — and the pipeline is deep enough
// anyway.
func fragChunk(maxSend, total int) int {
	fit := maxSend - fragFixed
	c := 1
	for c*2 <= fit {
		c *= 2
	}
	if total > 8*fit {
		if whole := fit &^ 63; whole > c {
			return whole
		}
	}
	return c
}
