package ib

import (
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
)

// module is one subchannel source: a port of an HCA (or one path of a
// port), its completion queue, receive queues and connections.
type module struct {
	id    string
	key   string
	attrs core.Attrs
	cfg   *config
	h     *hca
	port  uint8
	pattr verbs.PortAttr
	rank  int
	size  int
	boot  core.Bootstrap
	clock core.Clock
	// erroring are endpoints whose QP entered the error state, waiting for
	// the completion that says why (see asyncEvent).
	erroring []*endpoint
	log      zerolog.Logger
	metrics  *core.Metrics

	ch       verbs.CompChannel
	cq       verbs.CQ
	cm       *cm
	handlers core.Handlers
	onLost   func(int, error)
	closed   bool
	depth    int

	eps          []*endpoint
	byQPN        map[uint32]*endpoint
	queues       []*rqueue
	firstP       int
	maxFrame     int
	limits       core.FrameLimits
	sbufs        []*sendBuf
	rbufs        []*recvBuf
	mrs          []verbs.MR
	ops          []opSlot
	freeOps      []int32
	solicitedOps int

	wc     [64]verbs.WC
	stash  [64]verbs.WC
	nstash int
	armed  bool
	// armSolicitedOnly: the CQ is armed for solicited events only.
	armSolicitedOnly bool
	hdr              core.Header

	swr verbs.SendWR
	sg  [1]verbs.SGE
	rwr verbs.RecvWR
	rsg [1]verbs.SGE

	fc         flowCfg
	flow       policy.Driver[core.FlowEvent, core.FlowDecision]
	recv       policy.Driver[core.RecvEvent, core.RecvDecision]
	creditDue  []*endpoint
	gen        uint64      // Progress calls
	pendingEps []*endpoint // connected, with frames still waiting to go
	lost       []*endpoint
	connecting []*endpoint
	nextHK     time.Duration

	framesSent, framesRecv, bytesSent, bytesRecv *core.Counter
	puts, gets, rdmaBytes                        *core.Counter
	noSendBuf, backlogged, backlogRx, creditMsgs *core.Counter
	badFrames, peersLost, rejected, stalls       *core.Counter
	clamped                                      *core.Counter
	recvBytes, sendMem                           *core.Gauge
	dev                                          *devMetrics
}

// devMetrics mirror a softrc device's counters.
type devMetrics struct {
	rnrSent, rnrRecv, retries, bytesSent, bytesRecv, reads, nic *core.Gauge
}

func (m *module) metric(parts ...any) string {
	return core.MetricName(append([]any{"ib", m.id}, parts...)...)
}

// open opens the modules of a btl "ib" block: one per path of its port.
func open(env core.BTLEnv) ([]core.Module, error) {
	c, err := parseConfig(env.Params)
	if err != nil {
		return nil, err
	}
	if env.Boot == nil {
		return nil, fmt.Errorf("ib: no bootstrap")
	}
	pol := env.RecvBuffers
	if pol == nil {
		return nil, fmt.Errorf("ib: no receive-buffer policy: open the component through core's registry, which gives it its default (recvbuf %q)", DefaultRecvBuffers)
	}
	var mods []core.Module
	var fc *flowCfg // the first module resolves it; every path runs the same
	for path := 0; path < c.paths; path++ {
		m, err := newModule(env, c, path, pol, &fc)
		if err != nil {
			for _, x := range mods {
				x.Close()
			}
			return nil, err
		}
		mods = append(mods, m)
	}
	return mods, nil
}

func newModule(env core.BTLEnv, c *config, path int, pol core.RecvBuffers, fc **flowCfg) (_ *module, err error) {
	h, err := openHCA(c, env.Boot)
	if err != nil {
		return nil, err
	}
	m := &module{cfg: c, h: h, port: c.port, rank: env.Boot.Rank(), size: env.Boot.Size(), boot: env.Boot,
		clock: env.Clock, metrics: env.Metrics, byQPN: map[uint32]*endpoint{}}
	if m.clock == nil {
		m.clock = core.SystemClock
	}
	if m.metrics == nil {
		m.metrics = core.NewMetrics()
	}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	m.id = env.Instance
	if m.id == "" {
		m.id = fmt.Sprintf("%s_%d", strings.ReplaceAll(c.device, ".", "_"), c.port)
	}
	if c.paths > 1 {
		m.id += fmt.Sprintf("_p%d", path)
	}
	m.key = "btl.ib." + m.id
	m.log = env.Log.With().Str("component", "ib").Str("module", m.id).Logger()
	m.initMetrics()
	if m.pattr, err = h.dev.QueryPort(c.port); err != nil {
		return nil, fmt.Errorf("ib %s: %w", m.id, err)
	}
	if m.pattr.State != verbs.PortActive {
		return nil, fmt.Errorf("ib %s: port %d is %v", m.id, c.port, m.pattr.State)
	}
	if m.ch, err = h.dev.CreateCompChannel(); err != nil {
		return nil, fmt.Errorf("ib %s: %w", m.id, err)
	}
	info := core.RecvInfo{Peers: m.size - 1, EagerLimit: c.eagerLimit}
	setup, err := pol.Setup(info)
	if err != nil {
		return nil, fmt.Errorf("ib %s: receive buffers: %w", m.id, err)
	}
	if err := setup.Check(info); err != nil {
		return nil, fmt.Errorf("ib %s: the receive-buffer policy's layout: %w", m.id, err)
	}
	if len(setup.Queues) > maxQueues {
		return nil, fmt.Errorf("ib %s: %d receive queues, at most %d", m.id, len(setup.Queues), maxQueues)
	}
	if *fc == nil {
		firstP := 0
		for _, q := range setup.Queues {
			if q.Kind == core.QueuePerPeer {
				firstP = q.BufSize
				break
			}
		}
		f, err := resolveFlow(env, c, firstP)
		if err != nil {
			return nil, err
		}
		if f.policy != nil && firstP == 0 {
			m.log.Info().Msg("the receive layout has no per-peer queue: the flow-control policy has nothing to count, shared queues rely on the RNR NAK")
		}
		*fc = &f
	}
	m.fc = **fc
	m.recv.Init(policy.Config[core.RecvEvent, core.RecvDecision]{Policy: pol, Apply: policy.Each(m.applyRecv), Clock: m.clock, Rejected: m.rejected})
	m.flow.Init(policy.Config[core.FlowEvent, core.FlowDecision]{Policy: m.fc.policy, Apply: policy.Each(m.applyFlow), Clock: m.clock,
		Clamped: m.clamped, Rejected: m.rejected})
	// The flow-control scheme sets the per-peer queues' numbers.
	setup.Queues = append([]core.QueueSpec(nil), setup.Queues...)
	for i, q := range setup.Queues {
		if q.Kind == core.QueuePerPeer && m.fc.initial > 0 {
			setup.Queues[i].Count = m.fc.initial
		}
	}
	// The CQ holds every completion that can be outstanding: sends and
	// reads on every QP, posted receives, connection messages.
	cqe := cmRecvs + cmSends + (m.size * len(setup.Queues) * c.sendQueue)
	for _, q := range setup.Queues {
		if q.Kind == core.QueueShared {
			cqe += max(q.Max, q.Count)
		} else {
			cqe += max(q.Count, m.fc.max) * m.size
		}
	}
	cqe = min(cqe, min(h.attr.MaxCQE, 1<<20))
	if m.cq, err = h.dev.CreateCQ(cqe, m.ch); err != nil {
		return nil, fmt.Errorf("ib %s: CQ of %d: %w", m.id, cqe, err)
	}
	m.eps = make([]*endpoint, m.size)
	if err := m.setupQueues(setup); err != nil {
		return nil, err
	}
	if m.cm, err = newCM(m); err != nil {
		return nil, err
	}
	b := blob{lid: m.pattr.LID, gid: m.pattr.GID, udqpn: m.cm.qp.QPN(), mtu: m.pattr.ActiveMTU, credits: m.fc.credits, layout: setup.Queues}
	if err := env.Boot.Put(m.key, b.encode()); err != nil {
		return nil, fmt.Errorf("ib %s: publish address: %w", m.id, err)
	}
	maxSend := m.maxFrame - core.HeaderSize
	bw := c.bandwidth
	if m.pattr.Rate > 0 {
		bw = m.pattr.Rate
	}
	m.attrs = core.Attrs{
		Component: "ib", Name: "ib:" + m.id,
		EagerLimit: min(c.eagerLimit, maxSend), MaxSendSize: maxSend, RndvEagerLimit: min(c.rndvEager, maxSend),
		MaxRDMA: 1<<31 - 1, MaxReads: int(c.maxRdAtomic), Bandwidth: bw, Latency: c.latency,
		Exclusivity: c.exclusivity, Caps: core.CapSend | core.CapPut | core.CapGet | core.CapNotify,
	}
	m.limits = core.FrameLimits{Size: m.size, MaxPayload: maxSend}
	h.attach(m)
	m.log.Debug().Str("device", h.dev.Name()).Uint8("port", c.port).Uint16("lid", m.pattr.LID).
		Str("queues", setup.String()).Msg("module open")
	return m, nil
}

func (m *module) initMetrics() {
	mx := m.metrics
	c := func(n string) *core.Counter { return mx.Counter(m.metric(n)) }
	g := func(n string) *core.Gauge { return mx.Gauge(m.metric(n)) }
	m.framesSent, m.framesRecv = c("frames_sent"), c("frames_received")
	m.bytesSent, m.bytesRecv = c("bytes_sent"), c("bytes_received")
	m.puts, m.gets, m.rdmaBytes = c("rdma_puts"), c("rdma_gets"), c("rdma_bytes")
	m.noSendBuf, m.backlogged, m.backlogRx = c("no_send_buffer"), c("backlogged"), c("backlogged_received")
	m.creditMsgs, m.badFrames, m.peersLost, m.rejected = c("credit_messages"), c("bad_frames"), c("peers_lost"), c("policy_rejected")
	m.stalls, m.clamped = c("flow_control_stalls"), c("flow_decisions_clamped")
	m.recvBytes, m.sendMem = g("recv_registered_bytes"), g("send_registered_bytes")
	if m.h.soft != nil {
		d := func(n string) *core.Gauge { return mx.Gauge(core.MetricName("ib", m.h.dev.Name(), n)) }
		m.dev = &devMetrics{rnrSent: d("rnr_naks_sent"), rnrRecv: d("rnr_naks_received"), retries: d("retries"),
			bytesSent: d("wire_bytes_sent"), bytesRecv: d("wire_bytes_received"), reads: d("reads_outstanding"), nic: d("nic_engagements")}
	}
}

// Attrs describes the module.
func (m *module) Attrs() core.Attrs { return m.attrs }

// Endpoint returns the endpoint for rank; nothing is connected until it is
// first used. A rank's own traffic is left to btl/self.
func (m *module) Endpoint(rank int) (core.Endpoint, error) {
	if m.closed {
		return nil, errClosed
	}
	if rank < 0 || rank >= m.size {
		return nil, fmt.Errorf("ib %s: rank %d not in a %d-rank job", m.id, rank, m.size)
	}
	if rank == m.rank {
		return nil, fmt.Errorf("ib %s: rank %d is this process: %w", m.id, rank, core.ErrUnreachable)
	}
	return m.ep(rank), nil
}

// Register installs the handler for frames of type t.
func (m *module) Register(t core.FrameType, h core.Handler) error {
	if t == core.TypeCredit {
		return fmt.Errorf("ib %s: %v is the BTL's own frame type", m.id, t)
	}
	return m.handlers.Register(t, h)
}

// OnPeerLost installs the peer-loss callback.
func (m *module) OnPeerLost(f func(rank int, err error)) { m.onLost = f }

func (m *module) watch(e *endpoint) {
	if !e.watched {
		e.watched = true
		m.connecting = append(m.connecting, e)
	}
}

// Progress polls the CQ and handles what completed: frames go to their
// handlers (which may send), send buffers return to their free lists,
// RDMA operations complete. It never blocks.
func (m *module) Progress() int {
	if m.closed || m.depth > 0 {
		return 0
	}
	m.depth++
	m.gen++
	n := 0
	if m.armed {
		m.armed = false
		m.ackEvents()
	}
	if m.nstash > 0 {
		k := m.nstash
		m.nstash = 0
		for i := 0; i < k && !m.closed; i++ {
			m.complete(&m.stash[i])
		}
		n += k
	}
	k, err := m.cq.Poll(m.wc[:])
	if err != nil {
		m.fatal(err)
	}
	for i := 0; i < k && !m.closed; i++ {
		m.complete(&m.wc[i])
	}
	n += k
	if len(m.creditDue) > 0 && !m.closed {
		m.returnCredits()
	}
	if len(m.pendingEps) > 0 && !m.closed {
		k := 0
		for _, e := range m.pendingEps {
			e.sendPending()
			if len(e.pending) > 0 {
				m.pendingEps[k] = e
				k++
			}
		}
		clear(m.pendingEps[k:])
		m.pendingEps = m.pendingEps[:k]
	}
	if !m.closed {
		m.flow.Flush()
	}
	if !m.closed {
		if now := m.clock.Now(); now >= m.nextHK {
			m.housekeeping(now)
		}
	}
	if len(m.lost) > 0 && !m.closed {
		n += m.reportLost()
	}
	m.depth--
	return n
}

// complete handles one work completion.
func (m *module) complete(wc *verbs.WC) {
	idx := int(wc.WRID & wridIdx)
	switch wc.WRID & wridKind {
	case wridRecv:
		m.received(wc, idx)
	case wridSend:
		b := m.sbufs[idx]
		e := b.ep
		m.putSend(b)
		if e == nil {
			return
		}
		e.out[b.queue]--
		if wc.Status != verbs.WCSuccess {
			e.failure("send", wc.Status)
		}
	case wridRDMA:
		s := m.ops[idx]
		m.freeOp(idx)
		e := s.ep
		e.out[0]--
		if s.solicited {
			m.solicitedOps--
		}
		var err error
		if wc.Status != verbs.WCSuccess {
			what := "RDMA read"
			if s.put {
				what = "RDMA write"
			}
			err = e.failure(what, wc.Status)
		}
		s.op.Done.RDMADone(s.op, err)
	case wridCM:
		m.cm.complete(wc)
	}
}

// received handles a receive completion: check, deliver, repost, owe.
func (m *module) received(wc *verbs.WC, idx int) {
	b := m.rbufs[idx]
	q := m.queues[b.queue]
	e := b.ep
	if e == nil {
		e = m.byQPN[wc.QPN]
	}
	if q.shared {
		q.posted--
	}
	if wc.Status != verbs.WCSuccess {
		// A flushed or failed receive: its QP is in ERR. A per-peer buffer
		// dies with its QP; a shared one goes back to its SRQ.
		if e != nil {
			e.failure("receive", wc.Status)
		}
		if q.shared && !m.closed {
			m.repost(b, idx, nil)
		}
		return
	}
	if e == nil || e.state == epFailed {
		m.badFrames.Inc()
		if q.shared {
			m.repost(b, idx, nil)
		}
		return
	}
	frame := b.mem[:wc.ByteLen]
	h := &m.hdr
	if err := h.Decode(frame, m.limits); err != nil || int(h.Src) != e.rank || int(h.Length) != len(frame)-core.HeaderSize {
		m.badFrames.Inc()
		if err == nil {
			err = fmt.Errorf("%w: source %d, %d payload bytes in a %d-byte frame", core.ErrBadFrame, h.Src, h.Length, len(frame))
		}
		e.fail(fmt.Errorf("frame on queue %d: %w", q.idx, err))
		if q.shared {
			m.repost(b, idx, nil)
		}
		return
	}
	q.util.Observe(float64(wc.ByteLen) / float64(q.spec.BufSize))
	m.framesRecv.Inc()
	m.bytesRecv.Add(int64(wc.ByteLen))
	if e.state == epWaitRTU {
		e.established()
	}
	e.rxFrames++
	if h.Credits > 0 && m.fc.credits {
		if ci := m.creditQueue(b.queue); ci >= 0 {
			e.cred[ci].grant(int(h.Credits))
			e.st.credits.Set(int64(e.cred[ci].avail))
		}
	}
	if h.Flags&core.FlagBacklog != 0 {
		m.backlogRx.Inc()
		if m.fc.dynamic && !q.shared {
			m.flow.Event(core.FlowEvent{Kind: core.FlowBacklogged, Peer: int32(e.rank),
				Quota: int32(e.cred[b.queue].target), Value: 1, At: m.clock.Now()})
		}
	}
	if h.Type != core.TypeCredit {
		if err := m.handlers.Dispatch(h, frame[core.HeaderSize:]); err != nil {
			m.badFrames.Inc()
			e.fail(err)
		}
	}
	if m.closed {
		return
	}
	if q.shared {
		m.repost(b, idx, nil)
		return
	}
	if e.state == epFailed {
		return
	}
	m.reclaim(e, b, idx, h.Type != core.TypeCredit)
}

func (m *module) repost(b *recvBuf, idx int, e *endpoint) {
	if err := m.postRecv(b, idx, e); err != nil {
		if e != nil {
			e.fail(err)
		} else {
			m.log.Warn().Err(err).Msg("repost")
		}
		return
	}
	if q := m.queues[b.queue]; q.shared && q.wantLimit > 0 {
		m.rearm(q)
	}
}

// returnCredits sends explicit credit frames where credits became due
// during an earlier Progress and nothing has carried them back since —
// neither the frames the PML sent after that Progress nor those the
// application sent once its receive completed (seed 000 §4.2: "there is
// still no message sent by the MPI layer to the other side").
func (m *module) returnCredits() {
	for _, e := range m.creditDue {
		if e.dueGen == m.gen {
			continue // due since this Progress: give the PML a turn
		}
		e.creditIn = false
		if e.state != epConnected {
			continue
		}
		for i := range e.cred {
			c := &e.cred[i]
			if !m.queues[i].shared && c.due(m.queues[i].threshold) && !e.sendCredits(i) {
				// No send buffer now: try again next time.
				e.creditIn = true
			}
		}
	}
	k := 0
	for _, e := range m.creditDue {
		if e.creditIn {
			m.creditDue[k] = e
			k++
		}
	}
	clear(m.creditDue[k:])
	m.creditDue = m.creditDue[:k]
}

// reportLost tells the PML about lost peers, once each.
func (m *module) reportLost() int {
	lost := m.lost
	m.lost = nil
	for _, e := range lost {
		if m.onLost != nil {
			m.onLost(e.rank, e.err)
		}
	}
	return len(lost)
}

// housekeeping runs every PolicyPollInterval: async events, the policy,
// connection timers, device counters.
func (m *module) housekeeping(now time.Duration) {
	m.nextHK = now + core.PolicyPollInterval
	for {
		ev, ok := m.h.dev.PollAsyncEvent()
		if !ok {
			break
		}
		m.asyncEvent(ev)
	}
	if len(m.erroring) > 0 {
		m.failErroring(now)
	}
	m.recv.Tick(now)
	if m.fc.dynamic {
		m.idleReports(now)
	}
	m.flow.Tick(now)
	if len(m.connecting) > 0 {
		m.cmTimers(now)
	}
	if m.dev != nil {
		s := m.h.soft.Stats()
		m.dev.rnrSent.Set(s.RNRNaksSent)
		m.dev.rnrRecv.Set(s.RNRNaksReceived)
		m.dev.retries.Set(s.Retries)
		m.dev.bytesSent.Set(s.BytesSent)
		m.dev.bytesRecv.Set(s.BytesReceived)
		m.dev.reads.Set(s.ReadsOutstanding)
		m.dev.nic.Set(s.NICEngagements)
		for _, e := range m.eps {
			if e != nil && e.qps != nil {
				e.st.rnr.Set(rnrNaks(e.qps))
			}
		}
	}
}

// asyncEvent handles an asynchronous event of the device. Modules share
// a device, so an event about another module's objects is passed on.
func (m *module) asyncEvent(ev verbs.AsyncEvent) {
	switch ev.Type {
	case verbs.EventSRQLimitReached:
		for _, x := range m.siblings() {
			x.onLimit(ev.SRQ)
		}
	case verbs.EventQPFatal, verbs.EventQPAccessErr, verbs.EventQPReqErr:
		for _, x := range m.siblings() {
			if e := x.byQPN[ev.QPN]; e != nil {
				e.fail(fmt.Errorf("QP %#x: %v", ev.QPN, ev.Type))
			}
		}
	case verbs.EventQPLastWQEReached:
		// A consequence, not a cause: an SRQ-attached QP entered the error
		// state, and the completion that says why may still be on its way
		// to the CQ. Wait one housekeeping interval for it.
		for _, x := range m.siblings() {
			if e := x.byQPN[ev.QPN]; e != nil && e.state != epFailed && e.erroring == nil {
				e.erroring, e.errSince = fmt.Errorf("QP %#x: %v", ev.QPN, ev.Type), m.clock.Now()
				x.erroring = append(x.erroring, e)
			}
		}
	case verbs.EventPortErr:
		for _, x := range m.siblings() {
			if x.port == ev.Port {
				for _, e := range x.eps {
					if e != nil && e.state != epIdle {
						e.fail(fmt.Errorf("port %d: %v", ev.Port, ev.Type))
					}
				}
			}
		}
	case verbs.EventCQErr, verbs.EventDeviceFatal:
		for _, x := range m.siblings() {
			x.fatal(fmt.Errorf("%v", ev.Type))
		}
	}
}

// failErroring fails the endpoints whose QP entered the error state more
// than a housekeeping interval ago without a completion saying why.
func (m *module) failErroring(now time.Duration) {
	keep := m.erroring[:0]
	for _, e := range m.erroring {
		switch {
		case e.state == epFailed:
		case now-e.errSince >= core.PolicyPollInterval:
			e.fail(e.erroring)
		default:
			keep = append(keep, e)
		}
	}
	m.erroring = keep
}

// siblings are the open modules on this module's device.
func (m *module) siblings() []*module {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	return append([]*module(nil), m.h.mods...)
}

// fatal fails every peer: the module's CQ or device is gone.
func (m *module) fatal(err error) {
	m.log.Error().Err(err).Msg("module failed")
	for _, e := range m.eps {
		if e != nil && e.state != epIdle {
			e.fail(err)
		}
	}
}

// Close releases the module: its QPs, queues, buffers and CQ, and its
// reference on the device.
func (m *module) Close() error {
	if m.closed {
		return nil
	}
	if m.cm != nil && m.cq != nil {
		m.goodbye()
	}
	m.closed = true
	for _, e := range m.eps {
		if e == nil {
			continue
		}
		for _, qp := range e.qps {
			qp.Destroy()
		}
		if e.ah != nil {
			e.ah.Destroy()
		}
	}
	if m.cm != nil {
		m.cm.close()
	}
	for _, q := range m.queues {
		if q.srq != nil {
			q.srq.Destroy()
		}
	}
	if m.cq != nil {
		m.cq.Destroy()
	}
	if m.ch != nil {
		m.ch.Destroy()
	}
	for _, mr := range m.mrs {
		mr.Dereg()
	}
	if m.recvBytes != nil {
		recvBytesTotal(m.metrics).Add(-m.recvBytes.Load())
	}
	m.h.detach(m)
	m.h.release()
	return nil
}

// ---- Notifier (seed 004 §4.3) ----

// Arm requests one notification at the next solicited event: a frame sent
// with SendSolicited arriving, or — while a solicited RDMA operation is in
// flight — any completion, since verbs raise solicited events only for
// receives. Completions that are already waiting wake the notifier at once.
func (m *module) Arm() {
	if m.closed {
		return
	}
	if m.nstash == 0 {
		k, _ := m.cq.Poll(m.stash[:])
		m.nstash = k
	}
	if m.nstash > 0 {
		m.ch.Wake()
		return
	}
	if err := m.cq.ReqNotify(m.solicitedOps == 0); err != nil {
		m.log.Warn().Err(err).Msg("arm CQ")
		return
	}
	m.armed, m.armSolicitedOnly = true, m.solicitedOps == 0
	// Arm, then look again: a completion that came between the poll and
	// the arming raised no event.
	if k, _ := m.cq.Poll(m.stash[:]); k > 0 {
		m.nstash = k
		m.ch.Wake()
	}
}

// Notify is the channel notifications arrive on.
func (m *module) Notify() <-chan struct{} { return m.ch.Ready() }

// ackEvents acknowledges the channel's events (called from Progress when
// armed).
func (m *module) ackEvents() {
	for {
		cq, ok := m.ch.GetEvent()
		if !ok {
			return
		}
		cq.AckEvents(1)
	}
}
