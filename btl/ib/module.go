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
// port), its completion queue, receive queues and connections. Its state
// comes in parts, each with the file that runs it.
type module struct {
	id, key    string
	attrs      core.Attrs
	cfg        *config
	h          *hca
	port       uint8
	pattr      verbs.PortAttr
	rank, size int
	boot       core.Bootstrap
	clock      core.Clock
	log        zerolog.Logger
	metrics    *core.Metrics
	closed     bool
	draining   bool          // closing (goodbye): frames are not handed on, losses not reported
	depth      int           // Progress calls on the stack
	nextHK     time.Duration // when housekeeping runs next
	// replenished counts the connections up: with the send side's
	// completions and the credit engine's returns, what may let a refused
	// frame pass (Replenished).
	replenished uint64

	cq     completions  // the CQ and its notifications (notify.go)
	tx     sendSide     // send free lists, posts, RDMA (send.go, rdma.go)
	rx     recvSide     // receive queues, their buffers and posts (queues.go)
	credit creditEngine // flow control on the per-peer queues (credits.go)
	peers  peers        // endpoints by rank and by QPN, those lost (peers.go)
	cm     *cm          // the connection manager (cm.go)

	peersLost *core.Counter
	rejected  *core.Counter // the policies' decisions rejected
	dev       *devMetrics   // the softrc device's counters (stats.go); nil on hardware
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

// newModule opens path path of the port a block names: the device (shared
// with the block's other modules), the CQ, the receive queues of the
// receive-buffer policy's layout, the flow control, the send side and the
// connection manager, and publishes the module's address.
func newModule(env core.BTLEnv, c *config, path int, pol core.RecvBuffers, fc **flowCfg) (_ *module, err error) {
	h, err := openDevice(env, c)
	if err != nil {
		return nil, err
	}
	m := &module{cfg: c, h: h, port: c.port, rank: env.Boot.Rank(), size: env.Boot.Size(), boot: env.Boot,
		clock: env.Clock, metrics: env.Metrics, peers: peers{byQPN: map[uint32]*endpoint{}}}
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
	m.name(env, path)
	m.initMetrics()
	if m.pattr, err = h.dev.QueryPort(c.port); err != nil {
		return nil, fmt.Errorf("ib %s: %w", m.id, err)
	}
	if m.pattr.State != verbs.PortActive {
		return nil, fmt.Errorf("ib %s: port %d is %v", m.id, c.port, m.pattr.State)
	}
	setup, err := m.layout(env, pol, fc)
	if err != nil {
		return nil, err
	}
	m.rx.policy.Init(policy.Config[core.RecvEvent, core.RecvDecision]{Policy: pol, Apply: policy.Each(m.rx.apply), Clock: m.clock, Rejected: m.rejected})
	if err := m.cq.open(h, m.cqSize(setup.Queues)); err != nil {
		return nil, fmt.Errorf("ib %s: %w", m.id, err)
	}
	m.peers.eps = make([]*endpoint, m.size)
	if err := m.rx.open(m, setup, &m.credit.fc); err != nil {
		return nil, err
	}
	m.credit.open(m)
	m.tx.open(m, setup.Queues, setup.SendFreeListMax)
	if m.cm, err = newCM(m); err != nil {
		return nil, err
	}
	b := blob{lid: m.pattr.LID, gid: m.pattr.GID, udqpn: m.cm.qp.QPN(), mtu: m.pattr.ActiveMTU, credits: m.credit.fc.credits, layout: setup.Queues}
	if err := env.Boot.Put(m.key, b.encode()); err != nil {
		return nil, fmt.Errorf("ib %s: publish address: %w", m.id, err)
	}
	m.describe()
	h.attach(m)
	m.log.Debug().Str("device", h.dev.Name()).Uint8("port", c.port).Uint16("lid", m.pattr.LID).
		Str("queues", setup.String()).Msg("module open")
	return m, nil
}

// openDevice opens (or shares) the device a block names. softrc's ports
// take TCP connections: each must prove it is the job's, with the job's
// key. Hardware needs no key (the fabric's own partitioning).
func openDevice(env core.BTLEnv, c *config) (*hca, error) {
	var key *core.JobKey
	if c.provider == "softrc" {
		k, err := env.Key()
		if err != nil {
			return nil, fmt.Errorf("ib: %w", err)
		}
		key = k
	}
	return openHCA(c, env.Boot, key, core.SpansNodes(env.Locality))
}

// name sets the module's id (the instance's name, else the device's and
// the port's, with the path when there are several), its address key and
// its logger.
func (m *module) name(env core.BTLEnv, path int) {
	c := m.cfg
	m.id = env.Instance
	if m.id == "" {
		m.id = fmt.Sprintf("%s_%d", strings.ReplaceAll(c.device, ".", "_"), c.port)
	}
	if c.paths > 1 {
		m.id += fmt.Sprintf("_p%d", path)
	}
	m.key = "btl.ib." + m.id
	m.log = env.Log.With().Str("module", m.id).Logger() // component and rank come with env.Log
}

// layout asks the receive-buffer policy for the module's queues and checks
// them, resolves the flow-control scheme (once, for every path: fc) and
// lets it set the per-peer queues' numbers.
func (m *module) layout(env core.BTLEnv, pol core.RecvBuffers, fc **flowCfg) (core.RecvSetup, error) {
	info := core.RecvInfo{Peers: m.size - 1, EagerLimit: m.cfg.eagerLimit}
	setup, err := pol.Setup(info)
	if err != nil {
		return setup, fmt.Errorf("ib %s: receive buffers: %w", m.id, err)
	}
	if err := setup.Check(info); err != nil {
		return setup, fmt.Errorf("ib %s: the receive-buffer policy's layout: %w", m.id, err)
	}
	if len(setup.Queues) > maxQueues {
		return setup, fmt.Errorf("ib %s: %d receive queues, at most %d", m.id, len(setup.Queues), maxQueues)
	}
	if *fc == nil {
		firstP := 0
		for _, q := range setup.Queues {
			if q.Kind == core.QueuePerPeer {
				firstP = q.BufSize
				break
			}
		}
		f, err := resolveFlow(env, m.cfg, firstP)
		if err != nil {
			return setup, err
		}
		if f.policy != nil && firstP == 0 {
			m.log.Info().Msg("the receive layout has no per-peer queue: the flow-control policy has nothing to count, shared queues rely on the RNR NAK")
		}
		*fc = &f
	}
	m.credit.fc = **fc
	setup.Queues = append([]core.QueueSpec(nil), setup.Queues...)
	for i, q := range setup.Queues {
		if q.Kind == core.QueuePerPeer && m.credit.fc.initial > 0 {
			setup.Queues[i].Count = m.credit.fc.initial
		}
	}
	return setup, nil
}

// cqSize is the CQ's size: every completion that can be outstanding —
// sends and reads on every QP, posted receives, connection messages —
// within what the device allows.
func (m *module) cqSize(queues []core.QueueSpec) int {
	cqe := cmRecvCount(m.size) + cmSends + (m.size * len(queues) * m.cfg.sendQueue)
	for _, q := range queues {
		if q.Kind == core.QueueShared {
			cqe += max(q.Max, q.Count)
		} else {
			cqe += max(q.Count, m.credit.fc.max) * m.size
		}
	}
	return min(cqe, min(m.h.attr.MaxCQE, 1<<20))
}

// describe sets the module's attributes and frame limits.
func (m *module) describe() {
	c := m.cfg
	maxSend := m.rx.maxFrame - core.HeaderSize
	bw := c.bandwidth
	if m.pattr.Rate > 0 {
		bw = m.pattr.Rate
	}
	m.attrs = core.Attrs{
		Component: "ib", Name: "ib:" + m.id,
		EagerLimit: min(c.eagerLimit, maxSend), MaxSendSize: maxSend, RndvEagerLimit: min(c.rndvEager, maxSend),
		MaxRDMA: 1<<31 - 1, MaxReads: int(c.maxRdAtomic), Bandwidth: bw, Latency: c.latency,
		Exclusivity: c.exclusivity,
	}
	m.rx.limits = core.FrameLimits{Size: m.size, MaxPayload: maxSend}
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
	return m.rx.handlers.Register(t, h)
}

// OnPeerLost installs the peer-loss callback.
func (m *module) OnPeerLost(f func(rank int, err error)) { m.peers.onLost = f }

// Close releases the module: its QPs, queues, buffers and CQ, and its
// reference on the device.
func (m *module) Close() error {
	if m.closed {
		return nil
	}
	if m.cm != nil && m.cq.q != nil {
		m.goodbye()
	}
	m.closed = true
	for _, e := range m.peers.made {
		for _, qp := range e.qps {
			qp.Destroy()
		}
		if e.conn.ah != nil {
			e.conn.ah.Destroy()
		}
	}
	if m.cm != nil {
		m.cm.close()
	}
	m.rx.close()
	m.cq.close()
	m.tx.close()
	m.h.detach(m)
	m.h.release()
	return nil
}
