package extoll

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/btl/extoll/velo"
	"github.com/gobtl/gobtl/core"
)

// Device is what the module needs from the card: the nic interface plus
// eager connection set-up.
type Device interface {
	nic.Device
	// Connect reaches rank now instead of at first use.
	Connect(rank int) error
}

// Module is one EXTOLL card as a BTL module. Like every module it is
// driven by one goroutine at a time (the PML holds its lock around calls).
type Module struct {
	dev   Device
	eng   *velo.Engine
	attrs core.Attrs
	hs    core.Handlers
	log   zerolog.Logger

	rank, size int
	eps        []*endpoint
	reachable  func(rank int) bool
	peerLayout func(rank int) (string, bool) // the flow-control layout a peer published
	onLost     func(rank int, err error)
	lost       []error // per rank, once lost

	pkts  []nic.Slot  // scratch train for Send
	hdr   core.Header // the frame being delivered (handlers get a pointer)
	rx    []reassembly
	maxRx int // largest frame payload accepted

	metrics  *core.Metrics
	clock    core.Clock
	ops      []*core.RDMAOp // in flight, by cookie
	freeOps  []uint64
	closed   bool
	progress int // Progress calls since the last policy tick

	framesOut, framesIn, bytesOut, bytesIn *core.Counter
	badFrames, targetNotes                 *core.Counter
}

// reassembly collects the packets of one source's frame in progress.
type reassembly struct {
	buf  []byte
	want int // total bytes of the train (match header + payload), 0 if idle
}

type endpoint struct {
	m         *Module
	rank      int
	connected bool
}

// Attrs implements core.Module.
func (m *Module) Attrs() core.Attrs { return m.attrs }

// Endpoint implements core.Module.
func (m *Module) Endpoint(rank int) (core.Endpoint, error) {
	if m.closed {
		return nil, fmt.Errorf("extoll: endpoint: %w", core.ErrClosed)
	}
	if rank < 0 || rank >= m.size {
		return nil, fmt.Errorf("extoll: rank %d of %d: %w", rank, m.size, core.ErrUnreachable)
	}
	if m.reachable != nil && !m.reachable(rank) {
		return nil, fmt.Errorf("extoll: rank %d is on this node and left to shared memory: %w", rank, core.ErrUnreachable)
	}
	if ep := m.eps[rank]; ep != nil {
		return ep, nil
	}
	// Connections are made at first use: the PML asks for every endpoint
	// at start, before all peers may be reachable.
	ep := &endpoint{m: m, rank: rank}
	m.eps[rank] = ep
	return ep, nil
}

// connect sets up the connection to the endpoint's peer on first use.
func (ep *endpoint) connect() error {
	if ep.connected {
		return nil
	}
	m := ep.m
	if err := m.dev.Connect(ep.rank); err != nil {
		err = fmt.Errorf("extoll: %w", err)
		m.lose(ep.rank, err)
		return m.lost[ep.rank]
	}
	// Both sides derive credits and thresholds from the same layout; a
	// peer with another one would overflow or starve this mailbox.
	if m.peerLayout != nil {
		if theirs, ok := m.peerLayout(ep.rank); ok && theirs != m.eng.Layout() {
			err := fmt.Errorf("extoll: rank %d runs flow control %q, this rank %q: every rank must use the same stack", ep.rank, theirs, m.eng.Layout())
			m.lose(ep.rank, err)
			return m.lost[ep.rank]
		}
	}
	ep.connected = true
	return nil
}

// Register implements core.Module.
func (m *Module) Register(t core.FrameType, h core.Handler) error { return m.hs.Register(t, h) }

// OnPeerLost implements core.Module.
func (m *Module) OnPeerLost(f func(rank int, err error)) { m.onLost = f }

// Rank implements core.Endpoint.
func (ep *endpoint) Rank() int { return ep.rank }

// Send implements core.Endpoint: the frame becomes a train of VELO packets.
// Flow control may hold part of the train until credits return; Send has
// copied everything when it returns.
func (ep *endpoint) Send(h core.Header, pre, data []byte, _ core.SendFlags) error {
	m := ep.m
	if err := m.lost[ep.rank]; err != nil {
		return err
	}
	if m.closed {
		return fmt.Errorf("extoll: send: %w", core.ErrClosed)
	}
	if err := ep.connect(); err != nil {
		return err
	}
	n := len(pre) + len(data)
	if n > m.attrs.MaxSendSize {
		return fmt.Errorf("extoll: %d-byte frame exceeds the %d-byte maximum", n, m.attrs.MaxSendSize)
	}
	err := m.eng.Send(ep.rank, cut(m.pkts, &h, pre, data))
	switch {
	case err == nil:
		m.framesOut.Inc()
		m.bytesOut.Add(int64(n))
		return nil
	case errors.Is(err, core.ErrNoResources):
		return err
	}
	err = fmt.Errorf("extoll: send to rank %d: %w", ep.rank, err)
	m.lose(ep.rank, err)
	return err
}

// Packet implements velo.Receiver: reassembly and delivery.
func (m *Module) Packet(src int, tag uint8, p []byte) {
	if m.lost[src] != nil {
		return
	}
	r := &m.rx[src]
	switch {
	case tag == tagFirst && r.want == 0:
		h := &m.hdr
		if err := decodeMatch(p, src, m.maxRx, h); err != nil {
			m.bad(src, err)
			return
		}
		total := matchSize + int(h.Length)
		if total <= len(p) {
			if total != len(p) {
				m.bad(src, &core.FrameError{Peer: src, Field: "length", Value: uint64(h.Length), Reason: "packet longer than its frame"})
				return
			}
			m.deliver(h, p[matchSize:])
			return
		}
		if r.buf == nil {
			r.buf = make([]byte, 0, matchSize+m.maxRx)
		}
		r.buf = append(r.buf[:0], p...)
		r.want = total
	case tag == tagDrop:
		m.lose(src, fmt.Errorf("extoll: rank %d disconnected from this rank: %w", src, core.ErrPeerLost))
	case tag == tagMore && r.want > 0:
		if len(r.buf)+len(p) > r.want || (len(p) < nic.MaxPayload && len(r.buf)+len(p) != r.want) {
			m.bad(src, &core.FrameError{Peer: src, Field: "length", Value: uint64(len(r.buf) + len(p)), Reason: fmt.Sprintf("train of a %d-byte frame", r.want)})
			return
		}
		r.buf = append(r.buf, p...)
		if len(r.buf) < r.want {
			return
		}
		r.want = 0
		h := &m.hdr
		if err := decodeMatch(r.buf, src, m.maxRx, h); err != nil {
			m.bad(src, err)
			return
		}
		m.deliver(h, r.buf[matchSize:])
	default:
		m.bad(src, &core.FrameError{Peer: src, Field: "tag", Value: uint64(tag), Reason: fmt.Sprintf("packet out of place in a train (reassembling: %v)", r.want > 0)})
	}
}

func (m *Module) deliver(h *core.Header, payload []byte) {
	m.framesIn.Inc()
	m.bytesIn.Add(int64(len(payload)))
	if err := m.hs.Dispatch(h, payload); err != nil {
		m.bad(int(h.Src), err)
	}
}

// bad counts a bad frame and fails the connection it came on.
func (m *Module) bad(src int, err error) {
	m.badFrames.Inc()
	m.log.Error().Err(err).Int("peer", src).Msg("extoll: bad frame; failing the connection")
	m.lose(src, fmt.Errorf("extoll: %w", err))
}

// lose marks rank failed and tells the PML, once.
func (m *Module) lose(rank int, err error) {
	if rank < 0 || rank >= m.size || m.lost[rank] != nil {
		return
	}
	if !errors.Is(err, core.ErrPeerLost) {
		err = fmt.Errorf("%w (%w)", err, core.ErrPeerLost)
	}
	m.lost[rank] = err
	m.rx[rank] = reassembly{}
	m.eng.Forget(rank, err)
	if m.onLost != nil {
		m.onLost(rank, err)
	}
}

// Disconnect implements core.Module: a packet tagged tagDrop goes to rank
// behind the frames sent before it, through flow control, and tells it to
// report this rank lost; sends to rank fail from now on. While the packet
// waits for credits, what waits with it stays queued for the credits the
// peer returns as it polls; otherwise the engine forgets the peer at
// once. The loss is not reported back to this module's OnPeerLost: the
// caller knows.
func (m *Module) Disconnect(rank int, reason error) {
	if m.closed || rank < 0 || rank >= m.size || rank == m.rank || m.lost[rank] != nil {
		return
	}
	err := fmt.Errorf("extoll: disconnected from rank %d: %v: %w", rank, reason, core.ErrPeerLost)
	queued := false
	if ep, e := m.Endpoint(rank); e == nil && ep.(*endpoint).connect() == nil && m.lost[rank] == nil {
		m.pkts[0].SetHeader(0, tagDrop, false)
		queued = m.eng.Send(rank, m.pkts[:1]) == nil && m.eng.Backlog(rank) > 0
	}
	if m.lost[rank] != nil {
		return // connecting to tell it found it lost already
	}
	m.lost[rank] = err
	m.rx[rank] = reassembly{}
	if !queued {
		m.eng.Forget(rank, err)
	}
}

// Progress implements core.Module: packets from the mailbox, RMA
// notifications, the policy's late decisions, lost peers.
func (m *Module) Progress() int {
	if m.closed {
		return 0
	}
	n := m.eng.Poll(64, m)
	n += m.rmaProgress()
	for {
		pe, ok := m.eng.Failed()
		if !ok {
			break
		}
		m.lose(pe.Rank, fmt.Errorf("extoll: %w", pe.Err))
	}
	for {
		l, ok := m.dev.Lost()
		if !ok {
			break
		}
		m.lose(l.Rank, fmt.Errorf("extoll: %w", l.Err))
	}
	// The policy's clock: every 64 busy calls, or 16 idle ones (reading
	// the clock on every idle poll costs more than the poll).
	if n == 0 {
		m.progress += 4
	} else {
		m.progress++
	}
	if m.progress >= 64 {
		m.progress = 0
		m.eng.Tick()
	}
	return n
}

// DrainTimeout bounds how long Close keeps progressing to get packets that
// wait for credits out.
var DrainTimeout = 2 * time.Second

// Close implements core.Module. A send completes once the module holds the
// frame, and part of it may still wait for credits: Close first progresses
// until that is out (peers that still progress return the credits), for
// at most DrainTimeout.
func (m *Module) Close() error {
	if m.closed {
		return nil
	}
	if m.eng.Pending() > 0 {
		// On a simulator's clock the drain waits in virtual time: sleeping
		// would hold the only baton while the peers that return the
		// credits cannot run.
		now, wait := core.SystemClock.Now, time.Sleep
		if ic, ok := m.clock.(core.IdleClock); ok {
			now, wait = ic.Now, func(time.Duration) { ic.Idle() }
		}
		deadline := now() + DrainTimeout
		for d := time.Microsecond; m.eng.Pending() > 0 && now() < deadline; d = min(2*d, time.Millisecond) {
			if m.Progress() == 0 {
				wait(d)
			}
		}
		if n := m.eng.Pending(); n > 0 {
			m.log.Warn().Int("packets", n).Msg("extoll: closing with packets still waiting for credits")
		}
	}
	m.closed = true
	return m.dev.Close()
}

var _ core.Attacher = (*Module)(nil)

// Attach maps the files of the peers on this host when the device has
// files (the software device's mailboxes), so that Unlink may remove the
// names (core.Attacher).
func (m *Module) Attach(ctx context.Context) error {
	if a, ok := m.dev.(core.Attacher); ok {
		return a.Attach(ctx)
	}
	return nil
}

// Unlink removes the names of the device's files (core.Attacher).
func (m *Module) Unlink() error {
	if a, ok := m.dev.(core.Attacher); ok {
		return a.Unlink()
	}
	return nil
}

// Abort stops the module as if the process had died (for tests of peer
// loss): its peers find it lost.
func (m *Module) Abort() {
	if m.closed {
		return
	}
	m.closed = true
	if a, ok := m.dev.(interface{ Abort() }); ok {
		a.Abort()
	} else {
		m.dev.Close()
	}
}

// Engine exposes the VELO layer (counters, credits) to tests and
// experiments.
func (m *Module) Engine() *velo.Engine { return m.eng }
