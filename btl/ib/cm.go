package ib

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// The connection manager sets RC connections up on first use, as Open
// MPI's openib "udcm" does: at open every module publishes an address blob
// through the bootstrap (its port's LID and GID, the QP number of its UD
// QP, and its queue layout); the first Send, Put or Get to a peer reads
// the peer's blob, creates one RC QP per receive queue, and sends a REQ
// datagram with their numbers and initial PSNs. The peer creates its QPs,
// moves them to RTR and RTS, posts its per-peer buffers and answers REP;
// the requester does the same and confirms with RTU. Datagrams are lost
// when no buffer waits for them, so REQ and REP are retransmitted until
// answered, with a growing interval, cm_retries times. When both sides
// connect at once, the lower rank's request wins.
//
// At wire-up every rank may connect to every other at once (an all-to-all
// exchange), so the connection manager is paced and sized for it: its UD
// receive buffers grow with the job (cmRecvCount), a message that finds
// every send buffer in flight waits in a queue and leaves when one
// completes (it used to wait for the retransmission timer: 16 requests
// per 50 ms), and retransmission intervals carry a deterministic jitter
// so that the requests a flood lost do not all come back at once.

const (
	blobMagic = 0x42494247 // "GBIB"
	blobVer   = 2
	cmMagic   = 0x4d434247 // "GBCM"
	cmQKey    = 0x474f4254
	cmReq     = 1
	cmRep     = 2
	cmRTU     = 3
	cmDisc    = 4 // goodbye: the sender is closing its connections
	cmDrop    = 5 // the sender dropped the connection (Disconnect): the peer is lost to it
	maxQueues = 32
	// cmBufSize holds the largest connection message (20 bytes and 8 per
	// queue) behind the 40-byte GRH every UD receive starts with.
	cmBufSize = 40 + 20 + 8*maxQueues + 4
	cmRecvMin = 64
	cmRecvMax = 256
	cmSends   = 64
)

// cmRecvCount is how many UD receive buffers a module of a size-rank job
// posts: one per 16 peers, from 64 to 256. The requests of an all-to-all
// wire-up arrive together and a datagram that finds no buffer is lost,
// but what lost them at 256 simulated ranks was the senders' side (16
// send buffers, the rest waiting for the retransmission timer): with
// sends queued, 64 receive buffers took every request at once. The
// growth is a hedge for the fan-in of larger jobs, at 80 KiB per process
// at most.
func cmRecvCount(size int) int { return min(max(size/16, cmRecvMin), cmRecvMax) }

// blob is a module's published address: where to reach it, its receive
// layout with the buffers it posts per peer on each per-peer queue (a
// sender's initial credits), and whether it counts credits.
type blob struct {
	lid     uint16
	gid     verbs.GID
	udqpn   uint32
	mtu     verbs.MTU
	credits bool
	layout  []core.QueueSpec
}

const blobEntry = 7 // kind, buffer size, count

func (b *blob) encode() []byte {
	out := make([]byte, 0, 32+len(b.layout)*blobEntry)
	out = binary.LittleEndian.AppendUint32(out, blobMagic)
	fl := byte(0)
	if b.credits {
		fl = 1
	}
	out = append(out, blobVer, byte(b.mtu), byte(len(b.layout)), fl)
	out = binary.LittleEndian.AppendUint16(out, b.lid)
	out = append(out, b.gid[:]...)
	out = binary.LittleEndian.AppendUint32(out, b.udqpn)
	for _, q := range b.layout {
		out = append(out, byte(q.Kind))
		out = binary.LittleEndian.AppendUint32(out, uint32(q.BufSize))
		out = binary.LittleEndian.AppendUint16(out, uint16(min(q.Count, 0xffff)))
	}
	return out
}

func decodeBlob(p []byte) (*blob, error) {
	if len(p) < 30 || binary.LittleEndian.Uint32(p) != blobMagic {
		return nil, fmt.Errorf("not an ib address blob")
	}
	if p[4] != blobVer {
		return nil, fmt.Errorf("address blob version %d, want %d", p[4], blobVer)
	}
	n := int(p[6])
	if len(p) != 30+blobEntry*n {
		return nil, fmt.Errorf("address blob of %d bytes for %d queues", len(p), n)
	}
	b := &blob{mtu: verbs.MTU(p[5]), credits: p[7]&1 != 0, lid: binary.LittleEndian.Uint16(p[8:]), udqpn: binary.LittleEndian.Uint32(p[26:])}
	copy(b.gid[:], p[10:26])
	for i := 0; i < n; i++ {
		o := 30 + blobEntry*i
		b.layout = append(b.layout, core.QueueSpec{Kind: core.QueueKind(p[o]), BufSize: int(binary.LittleEndian.Uint32(p[o+1:])),
			Count: int(binary.LittleEndian.Uint16(p[o+5:]))})
	}
	return b, nil
}

// cmMsg is a REQ, REP or RTU datagram.
type cmMsg struct {
	kind  uint8
	src   uint32
	dst   uint32
	epoch uint32
	qpns  []uint32
	psns  []uint32
}

func (c *cmMsg) encode(b []byte) int {
	binary.LittleEndian.PutUint32(b, cmMagic)
	b[4], b[5], b[6], b[7] = c.kind, byte(len(c.qpns)), 0, 0
	binary.LittleEndian.PutUint32(b[8:], c.src)
	binary.LittleEndian.PutUint32(b[12:], c.dst)
	binary.LittleEndian.PutUint32(b[16:], c.epoch)
	o := 20
	for i := range c.qpns {
		binary.LittleEndian.PutUint32(b[o:], c.qpns[i])
		binary.LittleEndian.PutUint32(b[o+4:], c.psns[i])
		o += 8
	}
	return o
}

func decodeCM(p []byte) (*cmMsg, error) {
	if len(p) < 20 || binary.LittleEndian.Uint32(p) != cmMagic {
		return nil, fmt.Errorf("not a connection message")
	}
	c := &cmMsg{kind: p[4], src: binary.LittleEndian.Uint32(p[8:]), dst: binary.LittleEndian.Uint32(p[12:]), epoch: binary.LittleEndian.Uint32(p[16:])}
	n := int(p[5])
	if c.kind < cmReq || c.kind > cmDrop || len(p) < 20+8*n {
		return nil, fmt.Errorf("connection message kind %d with %d QPs in %d bytes", c.kind, n, len(p))
	}
	for i := 0; i < n; i++ {
		c.qpns = append(c.qpns, binary.LittleEndian.Uint32(p[20+8*i:]))
		c.psns = append(c.psns, binary.LittleEndian.Uint32(p[24+8*i:]))
	}
	return c, nil
}

// cm is a module's connection manager: a UD QP and its buffers, the
// messages waiting for a send buffer, and the endpoints connecting, whose
// retransmission timers run from housekeeping. It sets an endpoint's
// connection up and takes it down in good order, as its methods on the
// endpoint: resolve the peer, create the QPs, the handshake (connect,
// receive) and bring-up, retries and giving up, a goodbye answered. An
// endpoint's part of it is its connState; the endpoint keeps what a
// connection does once up (its send path, core.Endpoint's methods) and
// its failure.
type cm struct {
	m *module
	// connecting are the endpoints whose connection the module started or
	// accepted, until it is up or failed.
	connecting []*endpoint
	qp         verbs.QP
	mr         verbs.MR
	mem        []byte
	nrecv      int   // receive buffers, indexes [0, nrecv)
	free       []int // send buffer indexes
	// queue holds the messages that found every send buffer in flight,
	// in order; each leaves when a send completes.
	queue []cmOut
	wr    verbs.SendWR
	rwr   verbs.RecvWR
	sg    [1]verbs.SGE
	reqs  *core.Counter
	reps  *core.Counter
	retry *core.Counter
}

// cmOut is a queued connection message: its kind, to e's peer, made from
// e's state when it leaves.
type cmOut struct {
	e    *endpoint
	kind uint8
}

func newCM(m *module) (*cm, error) {
	n := cmRecvCount(m.size)
	c := &cm{m: m, nrecv: n, mem: make([]byte, (n+cmSends)*cmBufSize)}
	var err error
	if c.mr, err = m.h.pd.RegMR(c.mem, verbs.AccessLocalWrite); err != nil {
		return nil, fmt.Errorf("ib %s: connection manager buffers: %w", m.id, err)
	}
	c.qp, err = m.h.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: m.cq.q, RecvCQ: m.cq.q,
		Cap: verbs.QPCap{MaxSendWR: cmSends, MaxRecvWR: n, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		c.mr.Dereg()
		return nil, fmt.Errorf("ib %s: connection manager QP: %w", m.id, err)
	}
	for _, s := range []struct {
		a    verbs.QPAttr
		mask verbs.QPAttrMask
	}{
		{verbs.QPAttr{State: verbs.QPInit, Port: m.port, QKey: cmQKey}, verbs.UDInitMask},
		{verbs.QPAttr{State: verbs.QPRTR}, verbs.UDRTRMask},
		{verbs.QPAttr{State: verbs.QPRTS, SQPSN: rand.Uint32() & 0xffffff}, verbs.UDRTSMask},
	} {
		if err := c.qp.Modify(&s.a, s.mask); err != nil {
			c.close()
			return nil, fmt.Errorf("ib %s: connection manager QP to %v: %w", m.id, s.a.State, err)
		}
	}
	for i := 0; i < n; i++ {
		if err := c.postRecv(i); err != nil {
			c.close()
			return nil, err
		}
	}
	for i := 0; i < cmSends; i++ {
		c.free = append(c.free, n+i)
	}
	c.reqs = m.metrics.Counter(m.metric("cm_requests"))
	c.reps = m.metrics.Counter(m.metric("cm_replies"))
	c.retry = m.metrics.Counter(m.metric("cm_retransmits"))
	return c, nil
}

func (c *cm) buf(i int) []byte { return c.mem[i*cmBufSize : (i+1)*cmBufSize] }

func (c *cm) postRecv(i int) error {
	b := c.buf(i)
	c.sg[0] = verbs.SGE{Addr: verbs.AddrOf(b), Length: uint32(len(b)), LKey: c.mr.LKey()}
	c.rwr = verbs.RecvWR{WRID: wridCM | uint64(i), SG: c.sg[:]}
	if err := c.qp.PostRecv(&c.rwr); err != nil {
		return fmt.Errorf("ib %s: post connection manager buffer: %w", c.m.id, err)
	}
	return nil
}

func (c *cm) close() {
	if c.qp != nil {
		c.qp.Destroy()
	}
	if c.mr != nil {
		c.mr.Dereg()
	}
}

// send sends a connection message of kind to e's peer, or queues it
// while every send buffer is in flight. A kind already queued for e is not
// queued twice: it is made from e's state when it leaves.
func (c *cm) send(e *endpoint, kind uint8) {
	if len(c.free) == 0 {
		if e.conn.queued&(1<<kind) == 0 {
			e.conn.queued |= 1 << kind
			c.queue = append(c.queue, cmOut{e, kind})
		}
		return
	}
	c.transmit(e, kind)
}

// idle says no connection message waits or is in flight.
func (c *cm) idle() bool { return len(c.queue) == 0 && len(c.free) == cmSends }

// transmit posts a connection message of kind to e's peer from e's state,
// unless that state makes it moot (a request of a connection since
// accepted, anything to a peer failed). A request or a reply starts the
// timer that sends it again if no answer comes.
func (c *cm) transmit(e *endpoint, kind uint8) {
	m := c.m
	msg := cmMsg{kind: kind, src: uint32(m.rank), dst: uint32(e.rank), epoch: e.conn.epoch}
	switch kind {
	case cmReq:
		if e.state != epConnecting {
			return
		}
	case cmRep:
		if e.state != epWaitRTU && e.state != epConnected {
			return
		}
	case cmRTU:
		if e.state != epConnected {
			return
		}
	}
	if e.state == epFailed && kind != cmDisc && kind != cmDrop {
		// A goodbye and a drop are the exceptions: each is sent as the
		// connection closes, and may have waited for a send buffer.
		return
	}
	if kind != cmRTU {
		msg.qpns, msg.psns = qpns(e), e.conn.psns
	}
	if kind == cmReq || kind == cmRep {
		e.conn.next = m.clock.Now() + c.backoff(e)
	}
	i := c.free[len(c.free)-1]
	b := c.buf(i)
	n := msg.encode(b)
	c.sg[0] = verbs.SGE{Addr: verbs.AddrOf(b), Length: uint32(n), LKey: c.mr.LKey()}
	// Solicited: a progress thread armed for solicited events must answer a
	// connection request, or the solicited frame queued behind the
	// connection (a RNDV_START of rdma_read_async) could never arrive.
	c.wr = verbs.SendWR{WRID: wridCM | uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendSolicited, SG: c.sg[:],
		AH: e.conn.ah, RemoteQPN: e.conn.peer.udqpn, RemoteQKey: cmQKey}
	if err := c.qp.PostSend(&c.wr); err != nil {
		c.m.log.Debug().Err(err).Int("peer", e.rank).Msg("connection message not sent")
		return
	}
	c.free = c.free[:len(c.free)-1]
}

// complete handles a completion of the UD QP. A send buffer back sends the
// next queued message.
func (c *cm) complete(wc *verbs.WC) {
	i := int(wc.WRID & wridIdx)
	if i >= c.nrecv {
		c.free = append(c.free, i)
		for len(c.queue) > 0 && len(c.free) > 0 && !c.m.closed {
			q := c.queue[0]
			c.queue[0] = cmOut{}
			c.queue = c.queue[1:]
			q.e.conn.queued &^= 1 << q.kind
			c.transmit(q.e, q.kind)
		}
		return
	}
	if wc.Status == verbs.WCSuccess && wc.ByteLen > 40 {
		msg, err := decodeCM(c.buf(i)[40:wc.ByteLen])
		if err == nil {
			c.receive(msg)
		} else {
			c.m.log.Debug().Err(err).Msg("bad connection message")
		}
	}
	if wc.Status != verbs.WCWRFlushErr && !c.m.closed {
		if err := c.postRecv(i); err != nil {
			c.m.log.Warn().Err(err).Msg("connection manager")
		}
	}
}

// resolve reads e's peer's blob and makes its address handle.
func (c *cm) resolve(e *endpoint) error {
	m := c.m
	if e.conn.peer != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := m.boot.Get(ctx, e.rank, m.key)
	if err != nil {
		return fmt.Errorf("%w: no ib address published under %s: %v", core.ErrUnreachable, m.key, err)
	}
	b, err := decodeBlob(p)
	if err != nil {
		return fmt.Errorf("address of rank %d: %w", e.rank, err)
	}
	if len(b.layout) != len(m.rx.queues) {
		return fmt.Errorf("rank %d has %d receive queues, this rank %d: the layouts must agree", e.rank, len(b.layout), len(m.rx.queues))
	}
	for i, q := range b.layout {
		if q.Kind != m.rx.queues[i].spec.Kind || q.BufSize != m.rx.queues[i].spec.BufSize {
			return fmt.Errorf("rank %d's receive queue %d is %d-byte kind %d, this rank's %d-byte kind %d: the layouts must agree",
				e.rank, i, q.BufSize, q.Kind, m.rx.queues[i].spec.BufSize, m.rx.queues[i].spec.Kind)
		}
		if q.Kind == core.QueuePerPeer && q.Count < 1 {
			return fmt.Errorf("rank %d posts no buffers on per-peer queue %d", e.rank, i)
		}
	}
	if b.credits != m.credit.fc.credits {
		return fmt.Errorf("rank %d counts credits: %v, this rank: %v: configure the same flow-control policy on every rank", e.rank, b.credits, m.credit.fc.credits)
	}
	ah, err := m.h.pd.CreateAH(verbs.AHAttr{DLID: b.lid, DGID: b.gid, IsGlobal: true, PortNum: m.port})
	if err != nil {
		return fmt.Errorf("address handle for rank %d: %w", e.rank, err)
	}
	e.conn.peer, e.conn.ah = b, ah
	return nil
}

// createQPs makes e's RC QPs, one per queue, in INIT.
func (c *cm) createQPs(e *endpoint) error {
	m := c.m
	if e.qps != nil {
		return nil
	}
	for i, q := range m.rx.queues {
		attr := verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: m.cq.q, RecvCQ: m.cq.q,
			Cap: verbs.QPCap{MaxSendWR: m.cfg.sendQueue, MaxRecvWR: max(1, q.spec.Count, q.maxPosted), MaxSendSGE: 1, MaxRecvSGE: 1}}
		if q.shared {
			attr.SRQ = q.srq
		}
		qp, err := m.h.pd.CreateQP(attr)
		if err != nil {
			return fmt.Errorf("create QP for queue %d: %w", i, err)
		}
		e.qps = append(e.qps, qp)
		e.conn.psns = append(e.conn.psns, rand.Uint32()&0xffffff)
		m.peers.byQPN[qp.QPN()] = e
		a := verbs.QPAttr{State: verbs.QPInit, Port: m.port,
			AccessFlags: verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite}
		if err := qp.Modify(&a, verbs.RCInitMask); err != nil {
			return fmt.Errorf("QP %d to INIT: %w", i, err)
		}
	}
	return nil
}

// bringUp moves e's QPs to RTR and RTS towards the peer's QPs.
func (c *cm) bringUp(e *endpoint, rqpns, rpsns []uint32) error {
	m := c.m
	if len(rqpns) != len(e.qps) {
		return fmt.Errorf("peer offers %d QPs, want %d", len(rqpns), len(e.qps))
	}
	mtu := min(m.pattr.ActiveMTU, e.conn.peer.mtu)
	for i, qp := range e.qps {
		rtr := verbs.QPAttr{State: verbs.QPRTR, AH: verbs.AHAttr{DLID: e.conn.peer.lid, DGID: e.conn.peer.gid, IsGlobal: true, PortNum: m.port},
			PathMTU: mtu, DestQPN: rqpns[i], RQPSN: rpsns[i], MaxDestRdAtomic: m.cfg.maxRdAtomic, MinRNRTimer: m.cfg.minRNR}
		if err := qp.Modify(&rtr, verbs.RCRTRMask); err != nil {
			return fmt.Errorf("QP %d to RTR: %w", i, err)
		}
		rts := verbs.QPAttr{State: verbs.QPRTS, SQPSN: e.conn.psns[i], Timeout: m.cfg.timeout, RetryCnt: m.cfg.retryCnt,
			RNRRetry: m.cfg.rnrRetry, MaxRdAtomic: m.cfg.maxRdAtomic}
		if err := qp.Modify(&rts, verbs.RCRTSMask); err != nil {
			return fmt.Errorf("QP %d to RTS: %w", i, err)
		}
	}
	e.conn.remote = append(e.conn.remote[:0], rqpns...)
	// The credits a sender starts with are the buffers the peer posts for
	// it, as the peer published them.
	for i, q := range m.rx.queues {
		if !q.shared {
			e.cred[i].avail = e.conn.peer.layout[i].Count
		}
	}
	return m.credit.postPerPeer(e)
}

// qpns are the numbers of e's QPs, in queue order.
func qpns(e *endpoint) []uint32 {
	out := make([]uint32, len(e.qps))
	for i, qp := range e.qps {
		out[i] = qp.QPN()
	}
	return out
}

// prepare reads e's peer's address and makes e's QPs (both sides of a
// connection start so); it fails the endpoint and reports false if it
// cannot.
func (c *cm) prepare(e *endpoint) bool {
	err := c.resolve(e)
	if err == nil {
		err = c.createQPs(e)
	}
	if err != nil {
		e.fail(err)
		return false
	}
	return true
}

// connect starts the active side of e's connection (its first use) and
// watches it until it is up or failed.
func (c *cm) connect(e *endpoint) {
	c.watch(e)
	if !c.prepare(e) {
		return
	}
	e.state = epConnecting
	e.conn.epoch = rand.Uint32()
	e.conn.tries = 0
	c.send(e, cmReq)
	c.reqs.Inc()
}

// backoff is how long a request or reply to e's peer waits for its
// answer before it is sent again: cm_timeout doubling with each try up to
// a second, plus up to half as much again. The jitter is a hash of the two
// ranks and the try, not a random number, so that simulated runs repeat
// exactly.
func (c *cm) backoff(e *endpoint) time.Duration {
	m := c.m
	d := min(m.cfg.cmTimeout<<min(e.conn.tries, 10), time.Second)
	h := uint64(m.rank)*0x9e3779b97f4a7c15 ^ uint64(e.rank)*0xbf58476d1ce4e5b9 ^ uint64(e.conn.tries)*0x94d049bb133111eb
	h ^= h >> 31
	return d + time.Duration(h%512)*d/1024
}

// established marks e's connection usable and sends what waited for it.
func (c *cm) established(e *endpoint) {
	e.state = epConnected
	c.m.replenished++
	if len(e.tx.pending) > 0 {
		e.sendPending()
		if len(e.tx.pending) > 0 {
			c.m.tx.wait(e)
		}
	}
}

// closedByPeer ends a connection e's peer closed in good order: later
// operations fail with ErrPeerLost, but nothing is reported lost — the
// errors of the connections going down are expected.
func (c *cm) closedByPeer(e *endpoint) {
	m := c.m
	e.state = epFailed
	e.err = fmt.Errorf("ib %s: peer %d closed its connection: %w", m.id, e.rank, core.ErrPeerLost)
	m.log.Debug().Int("peer", e.rank).Msg("peer closed its connection")
	for _, qp := range e.qps {
		qp.Modify(&verbs.QPAttr{State: verbs.QPErr}, verbs.QPAttrState)
	}
}

// receive handles a connection message: a request accepted (or, when
// both sides connect at once, left to the lower rank's), a reply that
// completes ours, the RTU that completes the peer's, a drop, a goodbye.
func (c *cm) receive(msg *cmMsg) {
	m := c.m
	if int(msg.dst) != m.rank || int(msg.src) >= m.size || int(msg.src) == m.rank {
		return
	}
	e := m.ep(int(msg.src))
	switch msg.kind {
	case cmReq:
		c.accept(e, msg)
	case cmRep:
		switch e.state {
		case epConnecting:
			if msg.epoch != e.conn.epoch {
				return
			}
			if err := c.bringUp(e, msg.qpns, msg.psns); err != nil {
				e.fail(fmt.Errorf("complete connection: %w", err))
				return
			}
			e.state = epConnected // the RTU is made from a connected endpoint
			c.send(e, cmRTU)
			c.established(e)
		case epConnected:
			if equalQPNs(e.conn.remote, msg.qpns) {
				c.send(e, cmRTU)
			}
		}
	case cmRTU:
		if e.state == epWaitRTU && msg.epoch == e.conn.epoch {
			c.established(e)
		}
	case cmDrop:
		if e.state != epIdle && e.state != epFailed && equalQPNs(e.conn.remote, msg.qpns) {
			e.fail(fmt.Errorf("rank %d disconnected from this rank", msg.src))
		}
	case cmDisc:
		if e.state != epIdle && e.state != epFailed && equalQPNs(e.conn.remote, msg.qpns) {
			if !e.conn.saidBye {
				// Answer before the connection goes down: the peer waits
				// for it (goodbye), and once it has it takes the link
				// dropping for the close it is, not a lost peer.
				e.conn.saidBye = true
				c.send(e, cmDisc)
			}
			c.closedByPeer(e)
		}
	}
}

// accept answers a connection request from e's peer: it brings the
// connection up towards the peer's QPs and replies, or replies again when
// its reply was lost; when both sides connect at once, the lower rank's
// request wins.
func (c *cm) accept(e *endpoint, msg *cmMsg) {
	switch e.state {
	case epFailed:
		return
	case epConnected, epWaitRTU:
		if equalQPNs(e.conn.remote, msg.qpns) {
			c.send(e, cmRep) // our REP was lost
		}
		return
	case epConnecting:
		if c.m.rank < e.rank {
			return // both connect: ours wins, the peer answers it
		}
	}
	c.reps.Inc()
	if !c.prepare(e) {
		return
	}
	if err := c.bringUp(e, msg.qpns, msg.psns); err != nil {
		e.fail(fmt.Errorf("accept connection: %w", err))
		return
	}
	e.conn.epoch = msg.epoch
	e.state = epWaitRTU
	e.conn.tries = 0
	c.send(e, cmRep)
}

// goodbye is the module's part of the job's end. First it delivers what
// it accepted: a frame the PML handed over while its connection was set
// up (a finalize barrier's, say) is the module's to deliver, so the
// connections with frames waiting are brought up and the frames sent.
// Then it waits for its frames to be acknowledged, and only then tells
// every connected peer that it is closing: a peer told moves its QPs to
// ERR, which acknowledge nothing more, and the goodbye, a datagram, need
// not arrive after the frames sent before it on another QP — a goodbye
// that overtook a frame in an RNR retry lost the frame, and the peer's
// finalize barrier waited forever. Both waits are bounded by the time the
// connection manager gives a peer before it counts as lost. Last it waits
// (100 ms at most) for every peer's answer, a goodbye of its own (cm.receive):
// the peer sends it before its connections go down, so when our link to
// it drops the connection is known closed, not lost — a peer that saw
// only our goodbye and closed would leave us a QP fatal error and a lost
// peer. Meanwhile the module runs as in Progress, but losses are not
// reported and of the frames that arrive only the credits they carry
// count: the PML above is closed.
func (m *module) goodbye() {
	m.draining = true
	// The module's clock, not the wall's: under a simulator (package sim)
	// the completions come as virtual time moves.
	deadline := m.clock.Now() + m.cm.giveUp()
	for m.peers.undelivered() && m.clock.Now() < deadline {
		m.Progress()
	}
	for m.peers.unacknowledged() && m.clock.Now() < deadline {
		m.Progress()
	}
	sent := 0
	for _, e := range m.peers.made {
		if (e.state == epConnected || e.state == epWaitRTU) && !e.conn.saidBye {
			e.conn.saidBye = true
			m.cm.send(e, cmDisc)
			sent++
		}
	}
	busy := func() bool {
		if !m.cm.idle() {
			return true
		}
		for _, e := range m.peers.made {
			if e.conn.saidBye && e.state != epFailed {
				return true // no answer yet
			}
		}
		return false
	}
	deadline = m.clock.Now() + 100*time.Millisecond
	for sent > 0 && busy() && m.clock.Now() < deadline {
		m.Progress()
	}
}

// giveUp is how long the connection manager tries a peer before it
// fails it: every retransmission interval of cm_retries, jitter included.
func (c *cm) giveUp() time.Duration {
	m := c.m
	var t time.Duration
	for i := 0; i <= m.cfg.cmRetries; i++ {
		t += min(m.cfg.cmTimeout<<min(i, 10), time.Second) * 3 / 2
	}
	return t
}

func equalQPNs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// timers retransmits unanswered REQs and REPs, and gives up on a peer
// that never answers.
func (c *cm) timers(now time.Duration) {
	m := c.m
	for _, e := range c.connecting {
		if (e.state != epConnecting && e.state != epWaitRTU) || now < e.conn.next || e.conn.queued != 0 {
			continue // not due, or still waiting for a send buffer
		}
		e.conn.tries++
		if e.conn.tries > m.cfg.cmRetries {
			e.fail(fmt.Errorf("no answer to the connection %s after %d tries", map[epState]string{epConnecting: "request", epWaitRTU: "reply"}[e.state], e.conn.tries))
			continue
		}
		c.retry.Inc()
		if e.state == epConnecting {
			c.send(e, cmReq)
		} else {
			c.send(e, cmRep)
		}
	}
	k := 0
	for _, e := range c.connecting {
		if e.state == epConnecting || e.state == epWaitRTU {
			c.connecting[k] = e
			k++
		}
	}
	clear(c.connecting[k:])
	c.connecting = c.connecting[:k]
}

// watch puts e on the list of endpoints connecting, once.
func (c *cm) watch(e *endpoint) {
	if !e.conn.watched {
		e.conn.watched = true
		c.connecting = append(c.connecting, e)
	}
}
