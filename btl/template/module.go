package template

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/core"
)

// What travels on a connection besides frames: the connecting rank's
// hello, first, and its goodbye at Close. Both are shorter than a frame
// header, so one length test tells them from frames.
const (
	helloLen = 5 // 'H' and the rank, little-endian
	byeMsg   = 'B'
)

// errFull is what Send returns while the peer's socket is full: a value
// made once, so that the retry path allocates nothing either.
var errFull = fmt.Errorf("%s: the peer's socket is full: %w", Name, core.ErrNoResources)

// Module is one rank's instance of the transport.
type Module struct {
	attrs core.Attrs
	rank  int
	size  int
	boot  core.Bootstrap
	key   string // the bootstrap key of the address
	log   zerolog.Logger
	lim   core.FrameLimits
	batch int

	listenFd int
	dir      string
	hs       core.Handlers
	hdr      core.Header // the header handed to handlers; a local would escape
	onLost   func(rank int, err error)

	peers  []*endpoint // outgoing connections by rank, made on first use
	in     []inConn    // incoming connections, one per peer that sent
	lost   []error     // why a peer was lost, nil while it is not
	toTell []int       // lost peers not yet reported through onLost

	// One buffer each way serves every peer: calls are serialized.
	tx, rx []byte
	closed bool

	sent, recvd, bad *core.Counter
}

// inConn is a connection a peer made to this rank.
type inConn struct {
	fd   int
	rank int  // -1 until the hello
	bye  bool // the peer closed on purpose
}

func newModule(env core.BTLEnv, attrs core.Attrs, fd int, dir string) *Module {
	b := env.Boot
	met := env.Metrics
	if met == nil {
		met = core.NewMetrics()
	}
	return &Module{
		attrs: attrs, rank: b.Rank(), size: b.Size(), boot: b,
		key:   "btl." + Name + "." + env.Instance,
		log:   env.Log, // it names the component, the job and the rank
		lim:   core.FrameLimits{Size: b.Size(), MaxPayload: attrs.MaxSendSize},
		batch: env.Params.Int("batch"),

		listenFd: fd, dir: dir,
		peers: make([]*endpoint, b.Size()), lost: make([]error, b.Size()),
		tx: make([]byte, core.HeaderSize+attrs.MaxSendSize),
		// One byte more than the largest frame: a longer message is cut to
		// fit, and the length check then refuses it.
		rx: make([]byte, core.HeaderSize+attrs.MaxSendSize+1),

		sent:  met.Counter(core.MetricName(Name, env.Instance, "frames_sent")),
		recvd: met.Counter(core.MetricName(Name, env.Instance, "frames_received")),
		bad:   met.Counter(core.MetricName(Name, env.Instance, "bad_frames")),
	}
}

// Attrs implements core.Module.
func (m *Module) Attrs() core.Attrs { return m.attrs }

// Register implements core.Module.
func (m *Module) Register(t core.FrameType, h core.Handler) error {
	if err := m.hs.Register(t, h); err != nil {
		return fmt.Errorf("%s: %w", Name, err)
	}
	return nil
}

// OnPeerLost implements core.Module.
func (m *Module) OnPeerLost(f func(rank int, err error)) { m.onLost = f }

// Endpoint implements core.Module: it connects to rank on first use, to
// the address rank published through the bootstrap. The own rank is left
// to btl/self.
func (m *Module) Endpoint(rank int) (core.Endpoint, error) {
	if m.closed {
		return nil, fmt.Errorf("%s: endpoint %d: %w", Name, rank, core.ErrClosed)
	}
	if rank < 0 || rank >= m.size || rank == m.rank {
		return nil, fmt.Errorf("%s: rank %d: %w", Name, rank, core.ErrUnreachable)
	}
	if ep := m.peers[rank]; ep != nil {
		return ep, nil
	}
	path, err := m.boot.Get(context.Background(), rank, m.key)
	if err != nil {
		return nil, fmt.Errorf("%s: rank %d published no address: %v: %w", Name, rank, err, core.ErrUnreachable)
	}
	fd, err := dial(string(path))
	if err != nil {
		return nil, fmt.Errorf("%s: connect to rank %d at %s: %v: %w", Name, rank, path, err, core.ErrUnreachable)
	}
	hello := [helloLen]byte{'H'}
	binary.LittleEndian.PutUint32(hello[1:], uint32(m.rank))
	if err := unix.Sendto(fd, hello[:], unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, nil); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: greet rank %d: %v: %w", Name, rank, err, core.ErrUnreachable)
	}
	ep := &endpoint{m: m, rank: rank, fd: fd}
	m.peers[rank] = ep
	return ep, nil
}

// Progress implements core.Module: it takes new connections, delivers
// what arrived on each (at most batch frames per peer) and reports lost
// peers. Every socket is non-blocking, so it never waits.
func (m *Module) Progress() int {
	if m.closed {
		return 0
	}
	n := 0
	if len(m.in) < m.size-1 { // every peer connects once; then stop asking
		m.accept()
	}
	for i := range m.in {
		n += m.drain(&m.in[i])
	}
	m.in = compact(m.in)
	for _, r := range m.toTell {
		n++
		if m.onLost != nil {
			m.onLost(r, m.lost[r])
		}
	}
	m.toTell = m.toTell[:0]
	return n
}

func (m *Module) accept() {
	for {
		fd, _, err := unix.Accept4(m.listenFd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if !errors.Is(err, unix.EAGAIN) {
				m.log.Warn().Err(err).Msg("accept")
			}
			return
		}
		m.in = append(m.in, inConn{fd: fd, rank: -1})
	}
}

// drain reads what c holds, one message per read (seqpacket keeps the
// boundaries), and hands frames to their handlers.
func (m *Module) drain(c *inConn) int {
	n := 0
	for n < m.batch && c.fd >= 0 {
		k, err := unix.Read(c.fd, m.rx)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return n
		case err != nil || k == 0: // the peer closed its end
			m.hangUp(c, err)
			return n
		case c.rank < 0:
			m.greet(c, m.rx[:k])
		case k == 1 && m.rx[0] == byeMsg:
			c.bye = true
		default:
			if err := m.deliver(c.rank, m.rx[:k]); err != nil {
				m.bad.Inc()
				m.log.Warn().Err(err).Int("peer", c.rank).Msg("bad frame; dropping the connection")
				m.closeIn(c)
				m.lose(c.rank, err)
				return n
			}
			m.recvd.Inc()
			n++
		}
	}
	return n
}

// greet reads a connection's first message: who is on the other end.
func (m *Module) greet(c *inConn, msg []byte) {
	if len(msg) == helloLen && msg[0] == 'H' {
		r := int(binary.LittleEndian.Uint32(msg[1:]))
		if r >= 0 && r < m.size && r != m.rank && m.lost[r] == nil && !m.hasIn(r) {
			c.rank = r
			return
		}
	}
	m.bad.Inc()
	m.log.Warn().Int("bytes", len(msg)).Msg("a connection did not introduce itself as a rank of the job; closed")
	m.closeIn(c)
}

func (m *Module) hasIn(rank int) bool {
	for _, c := range m.in {
		if c.rank == rank && c.fd >= 0 {
			return true
		}
	}
	return false
}

// deliver checks one frame from rank and dispatches it.
func (m *Module) deliver(rank int, msg []byte) error {
	h := &m.hdr
	if err := h.Decode(msg, m.lim); err != nil {
		return err
	}
	if int(h.Src) != rank || core.HeaderSize+int(h.Length) != len(msg) {
		return &core.FrameError{Peer: rank, Field: "src/length", Value: uint64(h.Src),
			Reason: fmt.Sprintf("%d-byte frame from rank %d on rank %d's connection", len(msg), h.Src, rank)}
	}
	return m.hs.Dispatch(h, msg[core.HeaderSize:])
}

// hangUp handles the end of an incoming connection: after a goodbye it is
// the peer's Close, otherwise the peer died.
func (m *Module) hangUp(c *inConn, err error) {
	m.closeIn(c)
	if c.rank >= 0 && !c.bye {
		if err == nil {
			err = errors.New("connection closed without a goodbye")
		}
		m.lose(c.rank, err)
	}
}

func (m *Module) closeIn(c *inConn) {
	unix.Close(c.fd)
	c.fd = -1
}

// compact drops closed connections, in place.
func compact(in []inConn) []inConn {
	out := in[:0]
	for _, c := range in {
		if c.fd >= 0 {
			out = append(out, c)
		}
	}
	return out
}

// Disconnect implements core.Module: rank is lost from now on, and both
// connections with it close — the peer's drain meets the end of ours
// without a goodbye, its sends meet the end of its own — so that it
// learns of it and reports this rank lost.
func (m *Module) Disconnect(rank int, reason error) {
	if m.closed || rank < 0 || rank >= m.size || rank == m.rank || m.lost[rank] != nil {
		return
	}
	for i := range m.in {
		if c := &m.in[i]; c.rank == rank && c.fd >= 0 {
			m.closeIn(c)
		}
	}
	m.lose(rank, fmt.Errorf("disconnected: %v", reason))
}

// lose marks rank lost, once: its outgoing connection closes too, so that
// the peer learns of it, and the next Progress reports it.
func (m *Module) lose(rank int, cause error) {
	if rank < 0 || m.lost[rank] != nil {
		return
	}
	m.lost[rank] = fmt.Errorf("%s: rank %d: %v: %w", Name, rank, cause, core.ErrPeerLost)
	if ep := m.peers[rank]; ep != nil && ep.fd >= 0 {
		unix.Close(ep.fd)
		ep.fd = -1
	}
	m.toTell = append(m.toTell, rank)
}

// Close implements core.Module: it says goodbye on every outgoing
// connection (the PML has finalized, so nothing is still in flight) and
// releases the sockets and their directory.
func (m *Module) Close() error {
	if m.closed {
		return nil
	}
	m.shutdown(true)
	return os.RemoveAll(m.dir)
}

// shutdown closes every socket, after a goodbye if polite.
func (m *Module) shutdown(polite bool) {
	m.closed = true
	for _, ep := range m.peers {
		if ep != nil && ep.fd >= 0 {
			if polite {
				unix.Sendto(ep.fd, []byte{byeMsg}, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, nil)
			}
			unix.Close(ep.fd)
			ep.fd = -1
		}
	}
	for i := range m.in {
		if m.in[i].fd >= 0 {
			m.closeIn(&m.in[i])
		}
	}
	unix.Close(m.listenFd)
}

// endpoint is the module's handle on one peer.
type endpoint struct {
	m    *Module
	rank int
	fd   int
}

// Rank implements core.Endpoint.
func (ep *endpoint) Rank() int { return ep.rank }

// Send implements core.Endpoint: header, pre and data are gathered into
// the module's transmit buffer and written as one message. The socket
// copies it, so the caller may reuse its slices at once.
func (ep *endpoint) Send(h core.Header, pre, data []byte, _ core.SendFlags) error {
	m := ep.m
	if m.closed {
		return fmt.Errorf("%s: send: %w", Name, core.ErrClosed)
	}
	if err := m.lost[ep.rank]; err != nil {
		return err
	}
	n := len(pre) + len(data)
	if n > m.attrs.MaxSendSize {
		return fmt.Errorf("%s: %d-byte frame exceeds the %d-byte maximum", Name, n, m.attrs.MaxSendSize)
	}
	b := m.tx[:core.HeaderSize+n]
	h.Length = uint32(n)
	h.Encode(b)
	copy(b[core.HeaderSize+copy(b[core.HeaderSize:], pre):], data)
	err := unix.Sendto(ep.fd, b, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, nil)
	switch {
	case err == nil:
		m.sent.Inc()
		return nil
	case errors.Is(err, unix.EAGAIN):
		return errFull
	case gone(err):
		m.lose(ep.rank, err)
		return m.lost[ep.rank]
	}
	return fmt.Errorf("%s: send to rank %d: %w", Name, ep.rank, err)
}
