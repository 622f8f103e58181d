//go:build ofi && cgo

package ofi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
	"github.com/gobtl/gobtl/core"
)

// This file and endpoint.go are where the module meets core's contract
// (core.Module with Disconnect in session.go, core.Registrar, and
// core.Notifier on notifyingModule where the provider can notify;
// core.Endpoint, and core.RDMA on rmaPeer where it can keep a FIN behind
// a Put): the rest of the package is its parts — receive classes
// (queues.go), sessions (session.go), credits (credits.go), RDMA and the
// registration cache (rdma.go), liveness (live.go), the wait fd
// (notify.go).

// Module is one domain's endpoint: one subchannel of every peer's
// virtual channel.
type Module struct {
	attrs      core.Attrs
	cfg        *config
	rank, size int
	boot       core.Bootstrap
	key        *core.JobKey
	clock      core.Clock
	log        zerolog.Logger
	lim        core.FrameLimits
	pubKey     string // the bootstrap key this module publishes under
	ep         *fabric.Endpoint
	name       []byte // the endpoint's address
	self       []byte // its identity in transcripts
	me         *published
	writeFlags uint64 // DeliveryComplete where the provider takes it
	finMode    string // how a FIN after a Put is kept behind it (doc.go)
	localOnly  bool   // shm: peers on this host only

	hs     core.Handlers
	hdr    core.Header // the frame being delivered, decoded in place
	onLost func(rank int, err error)

	rxq               // receive classes and send buffers (queues.go)
	peers   []*peer   // by rank, made on first use
	counter uint64    // sessions opened (auth.go)
	strays  strays    // frames before their hello (session.go)
	ops     rdmaOps   // RDMA in flight (rdma.go)
	regs    *regCache // registrations (rdma.go)
	live    liveness  // peers' processes (live.go)
	unpacer unpacer   // its sockets on this host (pacing.go)
	notif   *notifier // the wait fd (notify.go); nil without one
	comp    [64]fabric.Completion
	now     time.Duration // clock at this Progress
	nextHK  time.Duration // next housekeeping
	toTell  []*peer       // lost peers not yet reported
	credDue []*peer       // peers owed an explicit credit message
	flush   []*peer       // peers with frames waiting for a session or credits
	closed  bool
	gen     uint64 // Progress calls
	rndv    bool   // the flow-control policy asks for rendezvous out of credits

	// replenished counts what may let a refused frame pass: send
	// completions, credits returned, sessions up, waiting frames gone, and
	// refusals by the provider, whose end the module cannot see
	// (core.Resources' Replenished).
	replenished uint64

	st stats
}

// stats are the module's counters (core.Metrics).
type stats struct {
	framesSent, framesRecv, injected, rejected, badFrames *core.Counter
	creditMsgs, stalls, backlogged, handshakes, lost      *core.Counter
	regHits, regMisses, rndv                              *core.Counter
	peers                                                 *peerMetrics
}

func newStats(met *core.Metrics, inst, dom string) stats {
	if met == nil {
		met = core.NewMetrics()
	}
	n := func(s string) *core.Counter { return met.Counter(core.MetricName(Name, inst, dom+"."+s)) }
	return stats{
		framesSent: n("frames_sent"), framesRecv: n("frames_received"), injected: n("frames_injected"),
		rejected: n("rejected"), badFrames: n("bad_frames"), creditMsgs: n("credit_messages"),
		stalls: n("credit_stalls"), backlogged: n("backlogged"), handshakes: n("handshakes"), lost: n("peers_lost"),
		regHits: n("reg_cache_hits"), regMisses: n("reg_cache_misses"), rndv: n("rndv_no_credit"),
		peers: newPeerMetrics(met, core.MetricName(Name, inst, dom)),
	}
}

// openEndpoint asks for the provider's pairing again with what the
// module would like — the completion semantics a FIN needs (doc.go),
// progress without being called, receive queues deep enough for the
// layout — and opens the best it gets: writes whose completion means
// delivery where the provider takes the flag, else writes ordered before
// later sends (FI_ORDER_SAW), else no Put at all; each with auto
// progress and the deep queue if it can, else without.
//
// Auto progress is asked for only where a notifier may use it (the same
// providers as the CQ's wait fd): tcp under ofi_rxm grants it with a
// thread that wakes at every arriving message and takes the provider's
// lock beside the polling rank, yet still serves a read only when its
// target polls (doc.go, Interrupts). Without it, bench latency (tcp,
// loopback, 7 alternations of old and new binaries in both orders):
// 8 B faster in 6 of 7 (7.2-8.3 against 7.2-9.6 µs), 64 KiB in 6 of 7,
// 1 MiB unchanged (within 3 %).
func openEndpoint(in *fabric.Info, rxWant int) (*fabric.Endpoint, uint64, string, error) {
	fins := []struct {
		flags, order uint64
		mode         string
	}{
		{fabric.DeliveryComplete, fabric.OrderSAS, "delivery-complete"},
		{0, fabric.OrderSAS | fabric.OrderSAW, "send-after-write order"},
		{0, fabric.OrderSAS, "none"},
	}
	var last error
	for _, f := range fins {
		for _, extra := range []struct {
			auto bool
			rx   int
		}{{true, rxWant}, {true, 0}, {false, rxWant}, {false, 0}} {
			if extra.auto && softwareCore(in.Provider) {
				continue
			}
			l, err := fabric.GetInfo(fabric.Hints{Provider: in.Provider, Domain: in.Domain, Fabric: in.Fabric, Caps: caps,
				OpFlags: f.flags, Order: f.order, AutoProgress: extra.auto, RxSize: extra.rx})
			if err != nil {
				last = err
				continue
			}
			pick := &l.Infos[0]
			for i := range l.Infos {
				if l.Infos[i].AddrFormat == in.AddrFormat {
					pick = &l.Infos[i]
					break
				}
			}
			// A wait fd only where a notifier may use it (Open): on a
			// software provider (tcp under rxm) it costs every completion
			// a write to the CQ's signal pipe and a read to drain it.
			ep, err := fabric.Open(pick, fabric.Options{Wait: !softwareCore(in.Provider)})
			l.Free()
			if err != nil {
				return nil, 0, "", err
			}
			return ep, f.flags, f.mode, nil
		}
	}
	return nil, 0, "", last
}

func newModule(env core.BTLEnv, c *config, key *core.JobKey, in *fabric.Info, idx int) (*Module, error) {
	info := core.RecvInfo{Peers: env.Boot.Size() - 1, EagerLimit: c.eagerLimit}
	layout, err := env.RecvBuffers.Setup(info)
	if err == nil {
		err = layout.Check(info)
	}
	if err != nil {
		return nil, fmt.Errorf("ofi: receive-buffer policy: %w", err)
	}
	flow, err := resolveFlow(env, layout.Queues[0].BufSize)
	if err != nil {
		return nil, err
	}
	ep, wflags, fin, err := openEndpoint(in, postedWant(layout, info.Peers))
	if err != nil {
		return nil, fmt.Errorf("ofi: open %s domain %s: %w", in.Provider, in.Domain, err)
	}
	b := env.Boot
	m := &Module{
		cfg: c, rank: b.Rank(), size: b.Size(), boot: b, key: key, clock: env.Clock, log: env.Log,
		pubKey: fmt.Sprintf("btl.%s.%s.%d", Name, env.Instance, idx), ep: ep, writeFlags: wflags, finMode: fin,
		localOnly: in.Provider == "shm", peers: make([]*peer, b.Size()), counter: uint64(time.Now().UnixNano()),
		st: newStats(env.Metrics, env.Instance, in.Domain),
	}
	if m.clock == nil {
		m.clock = core.SystemClock
	}
	m.rndv = flow.rndv
	if err := m.setup(c, in, layout, flow); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// setup makes the module's parts and publishes its address.
func (m *Module) setup(c *config, in *fabric.Info, layout core.RecvSetup, flow flowCfg) error {
	var err error
	if m.name, err = m.ep.Name(); err != nil {
		return fmt.Errorf("ofi: %w", err)
	}
	m.self = identity(m.rank, m.name)
	if err := m.rxq.init(m.ep, layout, m.size-1, c.sendBuffers, flow); err != nil {
		return fmt.Errorf("ofi %s: %w", in.Domain, err)
	}
	if err := m.postAll(); err != nil {
		return err
	}
	m.regs = newRegCache(m, c.regCache)
	m.ops.init(min(max(m.ep.Info.TxSize, 16), 1024))
	if err := m.live.init(); err != nil {
		return err
	}
	m.me = &published{name: m.name, pid: os.Getpid(), host: m.live.host}
	m.unpacer.init(m.ep.Info.Provider, m.name)
	for _, q := range m.classes {
		m.me.bufSize = append(m.me.bufSize, q.size)
		m.me.window = append(m.me.window, q.window)
	}
	m.attrs = m.makeAttrs(c, in)
	m.lim = core.FrameLimits{Size: m.size, MaxPayload: m.attrs.MaxSendSize}
	// A notification is worth arming only where completions come without
	// this process calling in: the wait fd, and a provider that moves data
	// by itself (a read of a peer that computes completes only then).
	// Without, the module is no core.Notifier (Open hands out m alone).
	if m.ep.WaitFD() >= 0 && m.ep.Info.DataProgress == fabric.ProgressAuto && !softwareCore(m.ep.Info.Provider) {
		if m.notif, err = newNotifier(m.ep); err != nil {
			return err
		}
	}
	register(m.name, &m.live.self)
	if err := m.boot.Put(m.pubKey, m.me.encode()); err != nil {
		return fmt.Errorf("ofi: publish address: %w", err)
	}
	fenced, warn := fence(m.ep.Info.Provider, m.ep.Info.AuthKeySize, os.Getenv)
	if warn {
		m.log.Warn().Str("domain", in.Domain).Str("fence", fenced).Msg("ofi: no fabric fence for this job")
	}
	m.log.Debug().Str("domain", in.Domain).Str("provider", m.ep.Info.Provider).Str("fin", m.finMode).
		Str("progress", m.ep.Info.DataProgress).Str("classes", layout.String()).Str("fence", fenced).Msg("ofi module open")
	return nil
}

func (m *Module) makeAttrs(c *config, in *fabric.Info) core.Attrs {
	a := core.Attrs{
		Component: Name, Name: Name + ":" + in.Domain, EagerLimit: c.eagerLimit,
		MaxSendSize: m.classes[len(m.classes)-1].size - core.HeaderSize, RndvEagerLimit: c.rndvEager,
		MaxRDMA: int64(min(m.ep.Info.MaxMsgSize, 1<<30)), MaxReads: c.maxReads, Bandwidth: c.bandwidth,
		Latency: time.Duration(c.latency), Exclusivity: c.exclusivity,
	}
	if c.instance != "" {
		a.Name = Name + ":" + c.instance + ":" + in.Domain
	}
	a.EagerLimit = min(a.EagerLimit, a.MaxSendSize)
	a.RndvEagerLimit = min(a.RndvEagerLimit, a.MaxSendSize)
	return a
}

// softwareCore reports a provider whose core moves a peer's bytes only
// when the peer's process calls in, whatever it says of its progress:
// tcp under ofi_rxm reports FI_PROGRESS_AUTO, yet an RDMA read of a peer
// that does not poll never completes (libfabric 1.17; sockets runs a
// thread of its own and hardware providers a NIC).
func softwareCore(prov string) bool {
	core := coreProvider(prov)
	return core == "tcp" || core == "net" || core == "udp"
}

// Attrs implements core.Module.
func (m *Module) Attrs() core.Attrs { return m.attrs }

// Register implements core.Module.
func (m *Module) Register(t core.FrameType, h core.Handler) error {
	if err := m.hs.Register(t, h); err != nil {
		return fmt.Errorf("ofi: %w", err)
	}
	return nil
}

// OnPeerLost implements core.Module.
func (m *Module) OnPeerLost(f func(rank int, err error)) { m.onLost = f }

// Endpoint implements core.Module: the peer's address goes into the
// address vector and the session to it opens (its hello leaves, and with
// it the provider's connection, where it has one, is made: rxm refuses
// sends until then, and a provider that progresses by itself makes it
// while the ranks compute). The own rank is left to btl/self.
func (m *Module) Endpoint(rank int) (core.Endpoint, error) {
	if m.closed {
		return nil, fmt.Errorf("ofi: endpoint %d: %w", rank, core.ErrClosed)
	}
	p, err := m.peer(rank)
	if err != nil {
		return nil, err
	}
	if p.tx == txIdle && p.err == nil {
		p.dial()
	}
	if m.finMode != "none" {
		return rmaPeer{p}, nil
	}
	return p, nil
}

// peer returns rank's peer, reading its published address the first
// time.
func (m *Module) peer(rank int) (*peer, error) {
	if rank < 0 || rank >= m.size || rank == m.rank {
		return nil, fmt.Errorf("ofi: rank %d: %w", rank, core.ErrUnreachable)
	}
	if p := m.peers[rank]; p != nil {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := m.boot.Get(ctx, rank, m.pubKey)
	if err != nil {
		return nil, fmt.Errorf("ofi: rank %d published no address for %s: %v: %w", rank, m.attrs.Name, err, core.ErrUnreachable)
	}
	pub, err := decodePublished(raw)
	if err == nil && len(pub.window) != len(m.classes) {
		err = fmt.Errorf("%d receive classes, this rank has %d: the job's ranks configure ofi alike", len(pub.window), len(m.classes))
	}
	if err != nil {
		return nil, fmt.Errorf("ofi: rank %d: %v: %w", rank, err, core.ErrUnreachable)
	}
	if m.localOnly && pub.host != m.live.host {
		return nil, fmt.Errorf("ofi: rank %d is on another host and %s reaches this one only: %w", rank, m.ep.Info.Provider, core.ErrUnreachable)
	}
	addr, err := m.ep.Insert(pub.name)
	if err != nil {
		return nil, fmt.Errorf("ofi: rank %d: %v: %w", rank, err, core.ErrUnreachable)
	}
	p := newPeer(m, rank, addr, pub)
	m.peers[rank] = p
	m.st.peers.add(p)
	m.live.watch(p, m.now)
	return p, nil
}

// Progress implements core.Module: it reads the CQ — arrived frames and
// control messages, send and RDMA completions — then sends what waited
// for a session or a credit, returns owed credits, keeps time (handshake
// retries, liveness) and reports lost peers. It never blocks.
func (m *Module) Progress() int {
	if m.closed {
		return 0
	}
	n := 0
	m.gen++
	m.now = m.clock.Now()
	if m.held > 0 {
		m.retryPosts()
	}
	for range 8 {
		k, err := m.ep.Poll(m.comp[:])
		if errors.Is(err, fabric.ErrAvail) {
			n += m.cqError()
			continue
		}
		if err != nil {
			m.log.Warn().Err(err).Msg("fi_cq_read")
			break
		}
		for i := range k {
			n += m.complete(&m.comp[i])
			if m.closed {
				return n
			}
		}
		if k < len(m.comp) {
			break
		}
	}
	n += m.ops.drainDone(m)
	if len(m.flush) > 0 {
		n += m.flushWaiting()
	}
	if len(m.credDue) > 0 {
		m.returnCredits()
	}
	if m.now >= m.nextHK {
		m.housekeeping()
	}
	return n + m.report()
}

// report tells the PML of peers lost since the last Progress.
func (m *Module) report() int {
	n := 0
	for len(m.toTell) > 0 {
		p := m.toTell[0]
		m.toTell = m.toTell[1:]
		n++
		if m.onLost != nil {
			m.onLost(p.rank, p.err)
		}
	}
	return n
}

// housekeeping runs every few milliseconds: handshake retries and
// timeouts, liveness.
func (m *Module) housekeeping() {
	m.nextHK = m.now + hkInterval
	for _, p := range m.peers {
		switch {
		case p == nil:
		case p.err == nil:
			p.tick(m.now)
		case p.dropOwed:
			p.sendDrop()
		}
	}
	m.live.check(m, m.now)
	m.strays.expire(m, m.now)
	m.unpacer.unpace()
}

// hkInterval is how often housekeeping runs while Progress is called.
const hkInterval = 5 * time.Millisecond

// Close implements core.Module: it says goodbye to every peer it has a
// session with, waits (briefly) for the goodbyes to leave, and releases
// the endpoint, its buffers and registrations.
func (m *Module) Close() error {
	if m.closed {
		return nil
	}
	m.goodbye()
	return m.shutdown(false, true)
}

// shutdown releases everything (release) or, for a module that dies
// (Kill), possibly leaves the provider's objects of a shared-memory
// endpoint mapped, as a dead process's are for its peers until they
// notice.
func (m *Module) shutdown(dead, release bool) error {
	m.closed = true
	unregister(m.name, &m.live.self, !dead)
	if m.notif != nil {
		m.notif.close()
	}
	m.live.close()
	if !release {
		return nil
	}
	if m.regs != nil {
		m.regs.closeAll()
	}
	var err error
	if m.ep != nil {
		err = m.ep.Close()
	}
	m.rxq.free()
	return err
}

// Kill makes m look, to its peers, like the module of a process that
// died: no goodbye, and its endpoint stops answering. For tests (the
// conformance suite's Kill hook).
func Kill(mod core.Module) {
	m := moduleOf(mod)
	if m.closed {
		return
	}
	// A shared-memory provider's peers write into this endpoint's memory
	// until they know it is gone: keep it mapped (it goes with the
	// process).
	m.shutdown(true, !m.localOnly)
}

// RegisterMem implements core.Registrar through the registration cache.
func (m *Module) RegisterMem(buf []byte, access core.Access) (core.Region, error) {
	if m.closed {
		return nil, fmt.Errorf("ofi: register: %w", core.ErrClosed)
	}
	return m.regs.get(buf, access)
}

// DeregisterMem implements core.Registrar: the registration stays cached
// until the cache needs the room.
func (m *Module) DeregisterMem(r core.Region) error {
	e, ok := r.(*regEntry)
	if !ok || e.refs <= 0 {
		return fmt.Errorf("ofi: deregister: not a registration of this module")
	}
	m.regs.put(e)
	return nil
}

// notifyingModule is a module with a notifier: the module and
// core.Notifier. Open hands it out where the provider can notify
// (newModule), the module alone elsewhere, so that the PML arms only
// what can wake it.
type notifyingModule struct{ *Module }

var _ core.Notifier = notifyingModule{}

// Arm implements core.Notifier.
func (m notifyingModule) Arm() {
	if !m.closed {
		m.notif.arm()
	}
}

// Notify implements core.Notifier.
func (m notifyingModule) Notify() <-chan struct{} { return m.notif.ch }

// moduleOf is the *Module behind a module Open returned.
func moduleOf(mod core.Module) *Module {
	if n, ok := mod.(notifyingModule); ok {
		return n.Module
	}
	return mod.(*Module)
}
