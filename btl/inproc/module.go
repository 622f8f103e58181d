package inproc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobtl/gobtl/core"
)

// maxBatch bounds the frames one Progress call takes from one link, so a
// busy sender cannot starve the others.
const maxBatch = 64

// Module is one rank's module on one rail.
type Module struct {
	f      *Fabric
	r      *rail
	rail   int
	rank   int
	attrs  core.Attrs
	rdmaOn bool // endpoints offer Put and Get (rdmaEndpoint)
	hs     core.Handlers
	hdr    core.Header // decoded header handed to handlers; a local would escape
	onLost func(int, error)

	in  []*link // from every rank to this one (nil for self)
	eps []*endpoint

	comps []completion // pending put/get completions, in issue order
	spare []completion

	regMu   sync.RWMutex
	regions map[uint64]*region
	nextKey atomic.Uint64

	lost     []atomic.Bool // peers whose connection broke, not yet reported
	reported []bool
	anyLost  atomic.Bool

	notify chan struct{}
	armed  atomic.Bool

	closed atomic.Bool

	// Set when the module was opened as a component (join): the job's
	// bootstrap, which tells whether a peer shares this process, and the
	// hold on the job's fabric that Close gives back.
	boot    core.Bootstrap
	bootKey string
	asked   []bool  // peers whose reachability is known
	reach   []error // nil: the peer shares the fabric
	release func()

	sent, recvd, bad *core.Counter
}

type completion struct {
	op   *core.RDMAOp
	err  error
	at   time.Duration
	peer int
}

func newModule(f *Fabric, r *rail, railIdx, rank int) *Module {
	o := r.opts
	m := &Module{f: f, r: r, rail: railIdx, rank: rank, regions: map[uint64]*region{},
		lost: make([]atomic.Bool, f.n), reported: make([]bool, f.n), notify: make(chan struct{}, 1)}
	m.rdmaOn = !o.NoRDMA
	m.attrs = core.Attrs{
		Component: "inproc", Name: fmt.Sprintf("inproc:%s", r.name),
		EagerLimit: o.EagerLimit, MaxSendSize: o.MaxSendSize, RndvEagerLimit: o.RndvEagerLimit,
		MaxRDMA: o.MaxRDMA, MaxReads: o.MaxReads, Bandwidth: o.Bandwidth, Latency: o.Latency,
		Exclusivity: o.Exclusivity, Mech: o.Mech, MechExchange: o.MechExchange,
	}
	m.in = make([]*link, f.n)
	m.eps = make([]*endpoint, f.n)
	for src := 0; src < f.n; src++ {
		if src != rank {
			m.in[src] = r.links[src*f.n+rank]
			m.eps[src] = &endpoint{m: m, peer: src, out: r.links[rank*f.n+src]}
		}
	}
	m.nextKey.Store(1)
	met := core.NewMetrics() // replaced by SetMetrics when opened as a component
	m.setMetrics(met)
	return m
}

func (m *Module) setMetrics(met *core.Metrics) {
	name := "inproc." + m.r.name
	m.sent, m.recvd, m.bad = met.Counter(name+".frames_sent"), met.Counter(name+".frames_received"), met.Counter(name+".bad_frames")
}

// join makes m a module opened through the job's bootstrap b, under key.
func (m *Module) join(b core.Bootstrap, key string, release func()) {
	m.boot, m.bootKey, m.release = b, key, release
	m.asked, m.reach = make([]bool, m.f.n), make([]error, m.f.n)
}

// Attrs implements core.Module.
func (m *Module) Attrs() core.Attrs { return m.attrs }

// Endpoint implements core.Module: every other rank of the fabric that
// lives in this process. On a rail with RDMA the endpoint is an
// rdmaEndpoint, which adds Put and Get; without, the plain endpoint.
func (m *Module) Endpoint(rank int) (core.Endpoint, error) {
	if m.closed.Load() {
		return nil, fmt.Errorf("inproc: endpoint %d: %w", rank, core.ErrClosed)
	}
	if rank < 0 || rank >= m.f.n || rank == m.rank {
		return nil, fmt.Errorf("inproc: rank %d: %w", rank, core.ErrUnreachable)
	}
	if m.boot != nil {
		if !m.asked[rank] {
			m.asked[rank], m.reach[rank] = true, m.reachable(rank)
		}
		if m.reach[rank] != nil {
			return nil, m.reach[rank]
		}
	}
	if m.rdmaOn {
		return rdmaEndpoint{m.eps[rank]}, nil
	}
	return m.eps[rank], nil
}

// Register implements core.Module.
func (m *Module) Register(t core.FrameType, h core.Handler) error { return m.hs.Register(t, h) }

// OnPeerLost implements core.Module.
func (m *Module) OnPeerLost(f func(int, error)) { m.onLost = f }

func (m *Module) markLost(peer int) {
	m.lost[peer].Store(true)
	m.anyLost.Store(true)
	m.signal()
}

// Disconnect implements core.Module: it drops this rail's connection to
// rank, so the peer learns of the failure too.
func (m *Module) Disconnect(rank int, _ error) {
	if rank >= 0 && rank < m.f.n && rank != m.rank && !m.lost[rank].Load() {
		m.f.Drop(m.rail, m.rank, rank)
	}
}

// Close implements core.Module.
func (m *Module) Close() error {
	if !m.closed.Swap(true) && m.release != nil {
		m.release()
	}
	return nil
}

// Arm implements core.Notifier.
func (m *Module) Arm() {
	m.armed.Store(true)
	for _, l := range m.in {
		if l != nil && l.head.Load() != l.tail.Load() {
			m.signal()
			return
		}
	}
	now := m.f.clock.Now()
	for _, c := range m.comps {
		if !c.op.Solicited {
			continue
		}
		if c.at <= now {
			m.signal()
		} else {
			// The completion lands when the link's delay has passed.
			time.AfterFunc(c.at-now, m.signal)
		}
		return
	}
}

// Notify implements core.Notifier.
func (m *Module) Notify() <-chan struct{} { return m.notify }

func (m *Module) signal() {
	if m.armed.CompareAndSwap(true, false) {
		select {
		case m.notify <- struct{}{}:
		default:
		}
	}
}

// Progress implements core.Module.
func (m *Module) Progress() int {
	if m.closed.Load() {
		return 0
	}
	n := 0
	var now time.Duration // read only when a frame carries a delivery time
	for src, l := range m.in {
		if l == nil {
			continue
		}
		for k := 0; k < maxBatch; k++ {
			head := l.head.Load()
			if head == l.tail.Load() || l.dead.Load() {
				break
			}
			s := &l.slots[head%uint64(len(l.slots))]
			if s.at > 0 {
				if now == 0 {
					now = m.f.clock.Now()
				}
				if s.at > now {
					break
				}
			}
			h := &m.hdr
			err := h.Decode(s.buf[:s.n], core.FrameLimits{Size: m.f.n, MaxPayload: m.attrs.MaxSendSize})
			if err == nil && int(h.Src) != src {
				err = &core.FrameError{Peer: src, Field: "src", Value: uint64(h.Src), Reason: fmt.Sprintf("frame came from rank %d", src)}
			}
			if err == nil {
				err = m.hs.Dispatch(h, s.buf[core.HeaderSize:core.HeaderSize+int(h.Length)])
			}
			l.head.Store(head + 1)
			n++
			if err != nil {
				m.bad.Inc()
				m.f.Drop(m.rail, m.rank, src)
				break
			}
			m.recvd.Inc()
		}
	}
	if len(m.comps) > 0 {
		n += m.complete(m.f.clock.Now())
	}
	if m.anyLost.Load() {
		m.anyLost.Store(false)
		for p := range m.lost {
			if m.lost[p].Load() && !m.reported[p] {
				m.reported[p] = true
				n++
				if m.onLost != nil {
					m.onLost(p, fmt.Errorf("inproc: rail %s: connection between ranks %d and %d dropped: %w", m.r.name, m.rank, p, core.ErrPeerLost))
				}
			}
		}
	}
	return n
}

// complete delivers the completions whose time has come, in issue order
// per peer (a completion waits behind an earlier one to the same peer, as
// on an RC connection).
func (m *Module) complete(now time.Duration) int {
	batch := m.comps
	m.comps, m.spare = m.spare[:0], batch
	n := 0
	var blocked uint64 // peers (mod 64) with an earlier completion still pending
	for _, c := range batch {
		bit := uint64(1) << (uint(c.peer) % 64)
		dead := m.eps[c.peer].out.dead.Load()
		if !dead && (c.at > now || blocked&bit != 0) {
			blocked |= bit
			m.comps = append(m.comps, c)
			continue
		}
		err := c.err
		if dead && err == nil {
			err = fmt.Errorf("inproc: rail %s: connection to rank %d dropped: %w", m.r.name, c.peer, core.ErrPeerLost)
		}
		c.op.Done.RDMADone(c.op, err)
		n++
	}
	return n
}

type endpoint struct {
	m    *Module
	peer int
	out  *link
}

// Rank implements core.Endpoint.
func (ep *endpoint) Rank() int { return ep.peer }

// Send implements core.Endpoint.
func (ep *endpoint) Send(h core.Header, pre, data []byte, flags core.SendFlags) error {
	m, l := ep.m, ep.out
	if l.dead.Load() {
		return fmt.Errorf("inproc: send to rank %d: %w", ep.peer, core.ErrPeerLost)
	}
	if m.closed.Load() {
		return fmt.Errorf("inproc: send: %w", core.ErrClosed)
	}
	n := len(pre) + len(data)
	if n > m.attrs.MaxSendSize {
		return fmt.Errorf("inproc: %d-byte frame exceeds the %d-byte maximum", n, m.attrs.MaxSendSize)
	}
	tail := l.tail.Load()
	if tail-l.head.Load() == uint64(len(l.slots)) {
		return fmt.Errorf("inproc: ring to rank %d full: %w", ep.peer, core.ErrNoResources)
	}
	s := &l.slots[tail%uint64(len(l.slots))]
	if cap(s.buf) < core.HeaderSize+n {
		s.buf = make([]byte, core.HeaderSize+max(n, 256))
	}
	s.buf = s.buf[:cap(s.buf)]
	h.Length = uint32(n)
	h.Encode(s.buf)
	copy(s.buf[core.HeaderSize+copy(s.buf[core.HeaderSize:], pre):], data)
	s.n = core.HeaderSize + n
	s.at = l.deliverAt(m.f.clock)
	s.solicited = flags&core.SendSolicited != 0
	l.tail.Store(tail + 1)
	m.sent.Inc()
	if s.solicited {
		m.r.mods[ep.peer].signal()
	}
	return nil
}

type region struct {
	key core.MemKey
	buf []byte
	acc core.Access
}

func (r *region) Key() core.MemKey { return r.key }
func (r *region) Bytes() []byte    { return r.buf }

// RegisterMem implements core.Registrar.
func (m *Module) RegisterMem(buf []byte, acc core.Access) (core.Region, error) {
	k := m.nextKey.Add(1)
	r := &region{key: core.MemKey{Len: uint64(len(buf)), Key: k, Aux: uint64(m.rank)}, buf: buf, acc: acc}
	m.regMu.Lock()
	m.regions[k] = r
	m.regMu.Unlock()
	return r, nil
}

// DeregisterMem implements core.Registrar.
func (m *Module) DeregisterMem(r core.Region) error {
	m.regMu.Lock()
	defer m.regMu.Unlock()
	if _, ok := m.regions[r.Key().Key]; !ok {
		return fmt.Errorf("inproc: deregister of unknown key %d", r.Key().Key)
	}
	delete(m.regions, r.Key().Key)
	return nil
}

// remote resolves a key on the peer, checking range and access like an
// HCA's memory translation would.
func (ep *endpoint) remote(op *core.RDMAOp, acc core.Access) ([]byte, error) {
	t := ep.m.r.mods[ep.peer]
	t.regMu.RLock()
	r, ok := t.regions[op.Remote.Key]
	t.regMu.RUnlock()
	if !ok || r.acc&acc == 0 || op.Offset+uint64(len(op.Local)) > uint64(len(r.buf)) {
		return nil, fmt.Errorf("inproc: rank %d key %d offset %d length %d: remote access error", ep.peer, op.Remote.Key, op.Offset, len(op.Local))
	}
	return r.buf[op.Offset:], nil
}

func (ep *endpoint) rdma(op *core.RDMAOp, put bool) error {
	m := ep.m
	if ep.out.dead.Load() {
		return fmt.Errorf("inproc: rdma to rank %d: %w", ep.peer, core.ErrPeerLost)
	}
	acc := core.AccessRemoteRead
	if put {
		acc = core.AccessRemoteWrite
	}
	buf, err := ep.remote(op, acc)
	if err == nil {
		if put {
			copy(buf, op.Local)
		} else {
			copy(op.Local, buf)
		}
	}
	m.comps = append(m.comps, completion{op: op, err: err, at: ep.out.deliverAt(m.f.clock), peer: ep.peer})
	if op.Solicited {
		m.signal()
	}
	return nil
}

// rdmaEndpoint is the endpoint of a rail with RDMA: the plain endpoint
// and Put and Get (core.RDMA).
type rdmaEndpoint struct{ *endpoint }

var _ core.RDMA = rdmaEndpoint{}

// Put implements core.RDMA.
func (ep rdmaEndpoint) Put(op *core.RDMAOp) error { return ep.rdma(op, true) }

// Get implements core.RDMA.
func (ep rdmaEndpoint) Get(op *core.RDMAOp) error { return ep.rdma(op, false) }
