// Package self is the BTL a rank uses to send to itself, as Open MPI's
// btl/self: frames are copied into a local queue and delivered by
// Progress; puts and gets are memory copies. It reaches only its own rank,
// with the highest exclusivity, so a self-send never touches a network.
package self

import (
	"fmt"
	"math"
	"sync"

	"github.com/gobtl/gobtl/core"
)

// Exclusivity of the self module: above every transport.
const Exclusivity = math.MaxInt32

// Params is the HCL schema of btl "self".
var Params = []core.Param{
	core.BTLParam("eager_limit", "64KiB"),
	core.BTLParam("max_send_size", "256KiB"),
	core.BTLParam("latency", "50ns").WithDoc("a send to self is one copy into a local queue"),
}

func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL, Name: "self", Params: Params, Reach: core.ReachSelf,
		Doc: "Sends to the own rank by memory copy. Always present; gobtl adds it when a stack does not name it.",
		OpenBTL: func(env core.BTLEnv) ([]core.Module, error) {
			a, err := core.BTLAttrs(env.Params)
			if err != nil {
				return nil, fmt.Errorf("self: %w", err)
			}
			m := New(env.Boot.Rank(), a.EagerLimit, a.MaxSendSize)
			m.attrs.Latency = a.Latency
			return []core.Module{m}, nil
		},
	})
}

type frame struct {
	buf []byte
	n   int
}

type completion struct {
	op  *core.RDMAOp
	err error
}

// Module is the self BTL of one rank.
type Module struct {
	rank  int
	attrs core.Attrs
	hs    core.Handlers
	hdr   core.Header // decoded header handed to handlers; a local would escape

	q          []frame // ring of frames; grows when full
	head, size int
	comps      []completion
	spare      []completion

	mu      sync.Mutex // guards regions: peers never touch them, but Close may race a late lookup
	regions map[uint64][]byte
	nextKey uint64
	closed  bool
}

// New returns the self module of rank with the given limits.
func New(rank, eagerLimit, maxSend int) *Module {
	m := &Module{rank: rank, q: make([]frame, 16), regions: map[uint64][]byte{}, nextKey: 1}
	m.attrs = core.Attrs{
		Component: "self", Name: "self", EagerLimit: eagerLimit, MaxSendSize: maxSend,
		Bandwidth: 20e9, Exclusivity: Exclusivity,
	}
	return m
}

// Attrs implements core.Module.
func (m *Module) Attrs() core.Attrs { return m.attrs }

// errOther is made once: the PML asks every module whether it reaches
// another rank at all, and self answers for each of the job's ranks —
// millions of answers in a simulated job of thousands.
var errOther = fmt.Errorf("self: another rank: %w", core.ErrUnreachable)

// Endpoint implements core.Module; only the own rank is reachable.
func (m *Module) Endpoint(rank int) (core.Endpoint, error) {
	if m.closed {
		return nil, fmt.Errorf("self: endpoint: %w", core.ErrClosed)
	}
	if rank != m.rank {
		return nil, errOther
	}
	return m, nil
}

// Rank implements core.Endpoint.
func (m *Module) Rank() int { return m.rank }

// Register implements core.Module.
func (m *Module) Register(t core.FrameType, h core.Handler) error { return m.hs.Register(t, h) }

// OnPeerLost implements core.Module; a rank never loses itself.
func (m *Module) OnPeerLost(func(int, error)) {}

// Send implements core.Endpoint: the frame is copied into the queue.
func (m *Module) Send(h core.Header, pre, data []byte, _ core.SendFlags) error {
	if m.closed {
		return fmt.Errorf("self: send: %w", core.ErrClosed)
	}
	n := len(pre) + len(data)
	if n > m.attrs.MaxSendSize {
		return fmt.Errorf("self: %d-byte frame exceeds the %d-byte maximum", n, m.attrs.MaxSendSize)
	}
	if m.size == len(m.q) {
		q := make([]frame, 2*len(m.q))
		for i := 0; i < m.size; i++ {
			q[i] = m.q[(m.head+i)%len(m.q)]
		}
		m.q, m.head = q, 0
	}
	f := &m.q[(m.head+m.size)%len(m.q)]
	if cap(f.buf) < core.HeaderSize+n {
		f.buf = make([]byte, core.HeaderSize+n)
	}
	f.buf = f.buf[:core.HeaderSize+n]
	h.Length = uint32(n)
	h.Encode(f.buf)
	copy(f.buf[core.HeaderSize+copy(f.buf[core.HeaderSize:], pre):], data)
	f.n = core.HeaderSize + n
	m.size++
	return nil
}

// Progress implements core.Module: it delivers the frames queued when it
// was called (frames sent by handlers wait for the next call) and the
// completions of puts and gets.
func (m *Module) Progress() int {
	n := 0
	for k := m.size; k > 0; k-- {
		f := &m.q[m.head]
		if err := m.hdr.Decode(f.buf[:f.n], core.FrameLimits{}); err == nil {
			_ = m.hs.Dispatch(&m.hdr, f.buf[core.HeaderSize:f.n])
		}
		m.head = (m.head + 1) % len(m.q)
		m.size--
		n++
	}
	if len(m.comps) > 0 {
		// Completions may start new operations; deliver this batch only.
		batch := m.comps
		m.comps, m.spare = m.spare[:0], batch
		for _, c := range batch {
			c.op.Done.RDMADone(c.op, c.err)
			n++
		}
	}
	return n
}

// Disconnect implements core.Module. The only peer is the rank itself,
// and the caller is that rank: it knows already, so nothing is left to
// tell (the PML fails its own sends to a channel it failed).
func (m *Module) Disconnect(int, error) {}

// Close implements core.Module.
func (m *Module) Close() error {
	m.closed = true
	return nil
}

type region struct {
	key core.MemKey
	buf []byte
}

func (r *region) Key() core.MemKey { return r.key }
func (r *region) Bytes() []byte    { return r.buf }

// RegisterMem implements core.Registrar.
func (m *Module) RegisterMem(buf []byte, _ core.Access) (core.Region, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.nextKey
	m.nextKey++
	m.regions[k] = buf
	return &region{key: core.MemKey{Len: uint64(len(buf)), Key: k}, buf: buf}, nil
}

// DeregisterMem implements core.Registrar.
func (m *Module) DeregisterMem(r core.Region) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.regions, r.Key().Key)
	return nil
}

func (m *Module) remote(op *core.RDMAOp) ([]byte, error) {
	m.mu.Lock()
	buf, ok := m.regions[op.Remote.Key]
	m.mu.Unlock()
	if !ok || op.Offset+uint64(len(op.Local)) > uint64(len(buf)) {
		return nil, fmt.Errorf("self: key %d offset %d length %d: remote access error", op.Remote.Key, op.Offset, len(op.Local))
	}
	return buf[op.Offset:], nil
}

// Put implements core.RDMA.
func (m *Module) Put(op *core.RDMAOp) error {
	dst, err := m.remote(op)
	if err == nil {
		copy(dst, op.Local)
	}
	m.comps = append(m.comps, completion{op, err})
	return nil
}

// Get implements core.RDMA.
func (m *Module) Get(op *core.RDMAOp) error {
	src, err := m.remote(op)
	if err == nil {
		copy(op.Local, src)
	}
	m.comps = append(m.comps, completion{op, err})
	return nil
}
