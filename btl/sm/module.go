package sm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/btl/sm/internal/release"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/topo"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// batch bounds the frames taken from one fast box or the FIFO in one
// Progress, so that one busy sender cannot starve the others.
const batch = 64

// Module is the shared-memory BTL module of one rank. Like every module it
// is driven by one goroutine at a time: the PML serializes Send, Put, Get
// and Progress.
type Module struct {
	cfg      config
	attrs    core.Attrs
	rank     int
	size     int
	boot     core.Bootstrap
	bootKey  string
	log      zerolog.Logger
	clock    core.Clock
	host     hostID
	loc      core.Locality // the engine's nodes; nil: unknown
	seg      *segment
	handlers core.Handlers
	lim      core.FrameLimits
	fboxMax  int // largest frame (header included) through a fast box
	maxFrame int // largest frame through a fragment

	peers  []*peer     // by rank, nil until connected
	attach attachState // peers' segments mapped before their names went

	rx     recvState   // the receive side, all in our own segment
	tx     sendState   // the send side: fragments in our segment
	rdma   rdmaState   // the single-copy mechanism: CMA, registrations, completions (cma.go)
	coop   coopState   // cooperative Gets (coop.go)
	health healthState // peer liveness: the checks and the losses to report

	inProgress bool
	closed     bool
	note       notifier

	st stats
}

// attachState are the segments of peers mapped by Attach before their
// names went, and why a peer's could not be; connect takes them.
type attachState struct {
	segs     []*segment
	errs     []error
	unlinked bool
}

// recvState is the receive side: the FIFO and the fast boxes peers write
// into, the sequence number expected from each sender, the senders whose
// frames are dropped, and the senders known active.
type recvState struct {
	hdr        core.Header // decoded here, not on the stack, so handlers do not make it escape
	fifo       fifoIn
	in         []inBox  // by sender
	expect     []uint32 // next sequence number by sender
	rxDead     []bool   // senders whose frames are dropped
	activeN    *uint32
	activeSeen int
	active     []int
}

// sendState is the send side's fragments in our segment: those free,
// those in flight to each destination, and how they are written.
type sendState struct {
	free        []int32
	inflight    [][]int32 // by destination, oldest first
	inflightN   int
	replenished uint64     // fragments taken back, and refusals sm cannot watch (peer.Replenished)
	copyIn      copyChoice // copy_in = "auto": how fragments are written (copyin.go)
}

// rdmaState is the single-copy mechanism's: whether CMA works and the
// word peers probe it with, our pid, the registered regions (recycled and
// live), and the RDMA completions to deliver.
type rdmaState struct {
	cma     cmaInfo
	pid     int
	regions []*region // recycled registrations
	live    []*region // registered now: what a peer's record may name (coop.go)
	regGen  uint64
	done    []rdmaCompletion
	spare   []rdmaCompletion
}

// coopState are the cooperative Gets' records (coop.go).
type coopState struct {
	free  []int32    // our free records
	gen   uint64     // generation of the last record posted
	gets  []coopGet  // our Gets with help in flight, oldest first
	helps []coopHelp // peers' records we were asked to help with, oldest first
}

// healthState is peer liveness: how often Progress checks, when it last
// did and whether it must soon, the pidfds it polls, and the peers lost
// to report to the PML.
type healthState struct {
	onLost    func(rank int, err error)
	lost      []lostPeer
	ticks     uint32
	lastCheck time.Duration
	checkSoon bool
	pollFds   []unix.PollFd
	pollPeers []*peer
}

type lostPeer struct {
	rank int
	err  error
}

// hostID tells whether two ranks share this host's /dev/shm.
type hostID struct {
	Boot string `json:"boot"` // kernel boot id
	Dev  uint64 `json:"dev"`  // device and inode of the segment directory
	Ino  uint64 `json:"ino"`
	Node int    `json:"node"` // pretend node (node_size), else 0
}

// blob is what a rank publishes through the bootstrap.
type blob struct {
	Host  hostID `json:"host"`
	Pid   int    `json:"pid"`
	Path  string `json:"path"`
	CMA   bool   `json:"cma"`
	Probe uint64 `json:"probe"` // address of a word peers read to test CMA
	Magic uint64 `json:"magic"` // its value
}

func localHost(dir string) (hostID, error) {
	var h hostID
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return h, fmt.Errorf("sm: boot id: %w", err)
	}
	h.Boot = string(b)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return h, fmt.Errorf("sm: segment directory: %w", err)
	}
	h.Dev, h.Ino = st.Dev, st.Ino
	return h, nil
}

func newModule(env core.BTLEnv, cfg config) (*Module, error) {
	b := env.Boot
	if b == nil {
		return nil, errors.New("sm: no bootstrap")
	}
	clock := env.Clock
	if clock == nil {
		clock = core.SystemClock
	}
	m := &Module{
		cfg:      cfg,
		rank:     b.Rank(),
		size:     b.Size(),
		boot:     b,
		bootKey:  "btl.sm." + env.Instance,
		log:      env.Log, // it names the component, the job and the rank
		clock:    clock,
		loc:      env.Locality,
		rdma:     rdmaState{pid: os.Getpid()},
		fboxMax:  core.HeaderSize + cfg.fboxMax,
		maxFrame: core.HeaderSize + cfg.attrs.MaxSendSize,
	}
	m.lim = core.FrameLimits{Size: m.size, MaxPayload: cfg.attrs.MaxSendSize}
	m.st.init(env.Metrics, env.Instance)
	host, err := localHost(cfg.dir)
	if err != nil {
		return nil, err
	}
	if cfg.nodeSize > 0 {
		host.Node = b.Rank() / cfg.nodeSize
	}
	m.host = host

	m.rdma.cma = detectCMA(cfg.singleCopy)
	if cfg.singleCopy == singleCopyCMA && !m.rdma.cma.ok {
		return nil, fmt.Errorf("sm: single_copy = \"cma\" but CMA cannot work here: %s", m.rdma.cma.why)
	}
	if cfg.singleCopy == singleCopyAuto && !m.rdma.cma.ok {
		m.log.Info().Str("reason", m.rdma.cma.why).Msg("single-copy CMA unavailable; large messages use the copy pipeline")
	}

	lay := newLayout(m.size, cfg.fboxSize, cfg.frags, m.maxFrame)
	// The job's prefix lets the launcher remove what a crash left; the
	// random part createSegment adds keeps anyone from making the file
	// first.
	name := core.ShmPrefix(b.JobID()) + "sm-" + fmt.Sprint(m.rank) + "-"
	if env.Instance != "" {
		name = core.ShmPrefix(b.JobID()) + "sm." + env.Instance + "-" + fmt.Sprint(m.rank) + "-"
	}
	seg, err := createSegment(cfg.dir, name, m.rank, os.Getpid(), lay)
	if err != nil {
		return nil, err
	}
	path := seg.path
	m.seg = seg
	m.initQueues(seg, lay, cfg.frags)

	m.attrs = cfg.attrs
	m.attrs.Component, m.attrs.Name = "sm", "sm"+instanceSuffix(env.Instance)
	m.attrs.Mech, m.attrs.MechExchange = nodeMech(m.attrs.Mech, cfg.mechDefault, m.nodeRanks(), len(topo.Self().Node))

	bl := blob{Host: host, Pid: os.Getpid(), Path: path, CMA: m.rdma.cma.ok, Probe: m.rdma.cma.probeAddr(), Magic: cmaProbeMagic}
	enc, _ := json.Marshal(bl)
	if err := b.Put(m.bootKey, enc); err != nil {
		m.abandon()
		return nil, fmt.Errorf("sm: publish address: %w", err)
	}
	return m, nil
}

// initQueues sets up the receive side over this rank's segment (its
// FIFO and a fast box per sender) and the free lists of its send
// fragments and cooperative-copy records.
func (m *Module) initQueues(seg *segment, lay layout, frags int) {
	m.rx.fifo.init(seg)
	m.rx.in = make([]inBox, m.size)
	for s := range m.rx.in {
		m.rx.in[s].init(seg, s, lay.fboxSize-slotHdr)
	}
	m.rx.expect = make([]uint32, m.size)
	m.rx.rxDead = make([]bool, m.size)
	m.rx.activeN = seg.u32(offActiveN)
	m.peers = make([]*peer, m.size)
	m.tx.free = make([]int32, 0, frags)
	for i := frags - 1; i >= 0; i-- {
		m.tx.free = append(m.tx.free, int32(i))
	}
	m.tx.inflight = make([][]int32, m.size)
	m.tx.copyIn.init(frags)
	m.coop.free = make([]int32, 0, coopRecs)
	for i := coopRecs - 1; i >= 0; i-- {
		m.coop.free = append(m.coop.free, int32(i))
	}
	m.coop.gets = make([]coopGet, 0, coopRecs)
}

// nodeRanks is the number of the job's ranks on this rank's node: as the
// engine's locality says, or node_size, or else the whole job.
func (m *Module) nodeRanks() int {
	if m.loc == nil && m.cfg.nodeSize > 0 {
		return min(m.cfg.nodeSize, m.size-m.rank/m.cfg.nodeSize*m.cfg.nodeSize)
	}
	return core.RanksOnNode(m.loc, m.rank, m.size)
}

func instanceSuffix(inst string) string {
	if inst == "" {
		return ""
	}
	return ":" + inst
}

// Attrs describes the module.
func (m *Module) Attrs() core.Attrs { return m.attrs }

// Register installs the handler for frames of type t.
func (m *Module) Register(t core.FrameType, h core.Handler) error {
	if err := m.handlers.Register(t, h); err != nil {
		return fmt.Errorf("sm: %w", err)
	}
	return nil
}

// OnPeerLost installs the function Progress calls when a peer dies.
func (m *Module) OnPeerLost(f func(rank int, err error)) { m.health.onLost = f }

// Endpoint connects to rank (once) and returns its endpoint. Ranks on
// other nodes (the engine's locality, when known), on other hosts, or
// behind another /dev/shm, are unreachable. Without CMA the endpoint is
// one without Put and Get (plainPeer): the module offers no RDMA.
func (m *Module) Endpoint(rank int) (core.Endpoint, error) {
	p, err := m.connect(rank)
	if err != nil {
		return nil, err
	}
	if !m.rdma.cma.ok {
		return plainPeer{p}, nil
	}
	return p, nil
}

func (m *Module) connect(rank int) (*peer, error) {
	if m.closed {
		return nil, fmt.Errorf("sm: endpoint %d: %w", rank, core.ErrClosed)
	}
	if rank < 0 || rank >= m.size {
		return nil, fmt.Errorf("sm: rank %d is out of range [0,%d): %w", rank, m.size, core.ErrUnreachable)
	}
	if p := m.peers[rank]; p != nil {
		return p, nil
	}
	// The engine's nodes come first: two "hosts" may share a kernel and
	// its /dev/shm (network namespaces), and are hosts all the same.
	if m.loc != nil && m.loc.Node(rank) != m.loc.Node(m.rank) {
		return nil, fmt.Errorf("sm: rank %d is on node %d, this rank on node %d: %w", rank, m.loc.Node(rank), m.loc.Node(m.rank), core.ErrUnreachable)
	}
	bl, err := m.peerBlob(rank)
	if err != nil {
		return nil, err
	}
	p := &peer{m: m, rank: rank, pid: bl.Pid, pidfd: -1, in: &m.rx.in[rank], expect: &m.rx.expect[rank], rxDead: &m.rx.rxDead[rank]}
	switch {
	case rank == m.rank:
		p.seg = m.seg
	case m.attach.errs != nil && m.attach.errs[rank] != nil:
		return nil, m.attach.errs[rank]
	default:
		if m.attach.segs != nil && m.attach.segs[rank] != nil {
			p.seg, m.attach.segs[rank] = m.attach.segs[rank], nil
		} else if p.seg, err = openSegment(bl.Path, rank, m.size); err != nil {
			return nil, fmt.Errorf("%w: %w", err, core.ErrUnreachable)
		}
		if bl.Pid != os.Getpid() {
			fd, err := unix.PidfdOpen(bl.Pid, 0)
			switch {
			case err == nil:
				p.pidfd = fd
			case errors.Is(err, syscall.ESRCH):
				p.seg.unmap()
				return nil, fmt.Errorf("sm: rank %d (pid %d) is gone: %w", rank, bl.Pid, core.ErrPeerLost)
			default:
				// Without pidfds (old kernels) deaths are noticed only
				// through the launcher.
				m.log.Debug().Err(err).Int("peer", rank).Msg("no pidfd; peer death detection off")
			}
		}
	}
	p.out.init(p.seg, m.rank)
	p.fifo.init(p.seg)
	p.cma = m.rdma.cma.ok && bl.CMA && m.rdma.cma.probe(bl.Pid, bl.Probe, bl.Magic)
	if m.rdma.cma.ok && !p.cma {
		m.log.Warn().Int("peer", rank).Msg("CMA does not reach this peer; RDMA to it fails")
	}
	m.peers[rank] = p
	if p.pidfd >= 0 {
		m.health.pollFds = append(m.health.pollFds, unix.PollFd{Fd: int32(p.pidfd), Events: unix.POLLIN})
		m.health.pollPeers = append(m.health.pollPeers, p)
	}
	return p, nil
}

// peerBlob is the address rank published, if it shares this rank's host
// and /dev/shm.
func (m *Module) peerBlob(rank int) (blob, error) {
	var bl blob
	raw, err := m.boot.Get(context.Background(), rank, m.bootKey)
	if err != nil {
		return bl, fmt.Errorf("sm: rank %d published no address: %v: %w", rank, err, core.ErrUnreachable)
	}
	if err := json.Unmarshal(raw, &bl); err != nil {
		return bl, fmt.Errorf("sm: rank %d published a bad address: %v: %w", rank, err, core.ErrUnreachable)
	}
	if bl.Host != m.host {
		return bl, fmt.Errorf("sm: rank %d is on another host or behind another %s: %w", rank, m.cfg.dir, core.ErrUnreachable)
	}
	return bl, nil
}

var _ core.Attacher = (*Module)(nil)

// Attach maps the segment of every peer on this node, so that Unlink may
// remove the names (core.Attacher). It maps what connect would map later;
// a peer it cannot map is remembered, and connecting to it fails then.
func (m *Module) Attach(context.Context) error {
	m.attach.segs = make([]*segment, m.size)
	m.attach.errs = make([]error, m.size)
	for r := range m.size {
		if r == m.rank || m.peers[r] != nil || (m.loc != nil && m.loc.Node(r) != m.loc.Node(m.rank)) {
			continue
		}
		bl, err := m.peerBlob(r)
		if err != nil {
			continue // another host: unreachable, and connect says so
		}
		if m.attach.segs[r], err = openSegment(bl.Path, r, m.size); err != nil {
			m.attach.errs[r] = fmt.Errorf("%w: %w", err, core.ErrUnreachable)
		}
	}
	return nil
}

// Unlink removes this rank's segment file; the peers have mapped it
// (core.Attacher).
func (m *Module) Unlink() error {
	if m.attach.unlinked {
		return nil
	}
	m.attach.unlinked = true
	if err := os.Remove(m.seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sm: unlink segment: %w", err)
	}
	return nil
}

// Progress delivers arrived frames and completions.
func (m *Module) Progress() int {
	if m.inProgress || m.closed {
		return 0
	}
	m.inProgress = true
	n := 0
	if len(m.rdma.done) > 0 {
		n += m.completeRDMA()
	}
	if c := int(atomic.LoadUint32(m.rx.activeN)); c != m.rx.activeSeen {
		m.refreshActive(c)
	}
	for _, s := range m.rx.active {
		n += m.pollBox(s, batch)
	}
	n += m.pollFifo()
	if m.tx.inflightN > 0 {
		m.reclaim()
	}
	if len(m.coop.helps)+len(m.coop.gets) > 0 {
		n += m.progressCoop()
	}
	// Every 64th call looks at the clock (and publishes the counters):
	// next to nothing while the caller spins, and timely when it sleeps
	// between polls — at the PML's longest back-off sleep, 500 µs, that
	// is every 32 ms, well within the liveness interval.
	m.health.ticks++
	if m.health.ticks&63 == 0 || m.health.checkSoon {
		m.housekeeping()
	}
	if len(m.health.lost) > 0 {
		n += m.reportLost()
	}
	m.inProgress = false
	return n
}

// refreshActive reads senders that announced themselves since last time.
// A sender bumps the count before it writes its entry, so an entry may
// still read zero: stop there and pick it up next time.
func (m *Module) refreshActive(c int) {
	for m.rx.activeSeen < c && m.rx.activeSeen < m.size {
		v := atomic.LoadUint32(m.seg.u32(m.seg.lay.activeOff + 4*m.rx.activeSeen))
		if v == 0 {
			return
		}
		s := int(v) - 1
		if s < m.size && !m.rx.rxDead[s] {
			m.rx.active = append(m.rx.active, s)
		}
		m.rx.activeSeen++
	}
}

// pollBox delivers up to max in-order frames from sender s's fast box.
func (m *Module) pollBox(s, max int) int {
	in := &m.rx.in[s]
	n := 0
	for n < max {
		frame, seq, ok, bad := in.peek()
		if bad {
			m.failPeer(s, fmt.Errorf("sm: corrupt fast-box slot from rank %d: %w", s, core.ErrBadFrame))
			break
		}
		if !ok || seq != m.rx.expect[s] {
			break // empty, or the next frame of s is in the FIFO
		}
		m.deliver(s, frame)
		in.advance(len(frame))
		m.rx.expect[s]++
		n++
		if m.rx.rxDead[s] {
			break
		}
	}
	in.publish()
	m.st.fboxRecvs += uint64(n)
	return n
}

func (m *Module) pollFifo() int {
	n := 0
	for n < batch {
		d, ok := m.rx.fifo.peek()
		if !ok {
			break
		}
		m.rx.fifo.pop()
		s, off := splitDesc(d)
		if s < 0 || s >= m.size {
			m.log.Error().Uint64("descriptor", d).Msg("FIFO descriptor names no rank; dropped")
			m.st.badFrames++
			continue
		}
		if m.rx.rxDead[s] {
			continue
		}
		p := m.peers[s]
		if p == nil {
			var err error
			if p, err = m.connect(s); err != nil {
				m.failPeer(s, fmt.Errorf("sm: map the segment of rank %d to read its fragment: %w", s, err))
				continue
			}
		}
		lay := &p.seg.lay
		if off >= lay.coopOff {
			// Not a frame: a record of a cma read that s asks us to help with.
			if (off-lay.coopOff)%coopRecSize != 0 || off+coopRecSize > lay.coopOff+coopRecs*coopRecSize {
				m.failPeer(s, fmt.Errorf("sm: rank %d sent record offset %d outside its records: %w", s, off, core.ErrBadFrame))
				continue
			}
			m.coop.helps = append(m.coop.helps, coopHelp{s, off})
			n++
			continue
		}
		if off < lay.fragOff || (off-lay.fragOff)%lay.fragStride != 0 || off+lay.fragStride > len(p.seg.mem) {
			m.failPeer(s, fmt.Errorf("sm: rank %d sent fragment offset %d outside its fragments: %w", s, off, core.ErrBadFrame))
			continue
		}
		seq := atomic.LoadUint32(p.seg.u32(off + fragOffSeq))
		ln := int(atomic.LoadUint32(p.seg.u32(off + fragOffLen)))
		pad := int(atomic.LoadUint32(p.seg.u32(off + fragOffFrame)))
		if seq != m.rx.expect[s] {
			// Frames sent before this one through the fast box are
			// visible: the sender published them before it pushed this.
			m.pollBox(s, int(seq-m.rx.expect[s]))
			if seq != m.rx.expect[s] {
				m.failPeer(s, fmt.Errorf("sm: rank %d fragment has sequence %d, expected %d: %w", s, seq, m.rx.expect[s], core.ErrBadFrame))
				continue
			}
		}
		if ln < core.HeaderSize || pad >= cacheLine || fragHdr+pad+ln > lay.fragStride {
			m.failPeer(s, fmt.Errorf("sm: rank %d fragment of %d bytes at %d: %w", s, ln, pad, core.ErrBadFrame))
			continue
		}
		start := off + fragHdr + pad
		m.deliver(s, p.seg.mem[start:start+ln])
		release.Store32(p.seg.u32(off+fragOffDone), 1)
		m.rx.expect[s]++
		n++
	}
	m.st.fifoRecvs += uint64(n)
	return n
}

// deliver checks a frame from s and hands it to its handler.
func (m *Module) deliver(s int, frame []byte) {
	h := &m.rx.hdr
	if err := h.Decode(frame, m.lim); err != nil {
		m.failPeer(s, fmt.Errorf("sm: from rank %d: %w", s, err))
		return
	}
	if int(h.Src) != s {
		m.failPeer(s, fmt.Errorf("sm: frame from rank %d claims source %d: %w", s, h.Src, core.ErrBadFrame))
		return
	}
	// The handler is called here, not through Handlers.Dispatch, which
	// is too large to be inlined: one call less a frame.
	if fn := m.handlers[h.Type]; fn != nil {
		fn(h, frame[core.HeaderSize:core.HeaderSize+int(h.Length)])
	} else if err := m.handlers.Dispatch(h, nil); err != nil {
		m.failPeer(s, fmt.Errorf("sm: %w", err))
	}
}

// reclaim takes back fragments their receivers are done with. Receivers
// finish one sender's fragments in order, so only the oldest of each
// destination needs looking at.
func (m *Module) reclaim() {
	for d, q := range m.tx.inflight {
		k := 0
		for k < len(q) && atomic.LoadUint32(m.seg.u32(m.seg.lay.frag(int(q[k]))+fragOffDone)) != 0 {
			m.tx.free = append(m.tx.free, q[k])
			k++
		}
		if k > 0 {
			m.tx.replenished++
			m.tx.inflightN -= k
			m.tx.inflight[d] = append(q[:0], q[k:]...)
		}
	}
}

// failPeer stops talking to s and reports it lost.
func (m *Module) failPeer(s int, err error) {
	if m.rx.rxDead[s] {
		return
	}
	m.rx.rxDead[s] = true
	if errors.Is(err, core.ErrBadFrame) {
		m.st.badFrames++
	}
	m.log.Error().Err(err).Int("peer", s).Msg("peer lost")
	for i, a := range m.rx.active {
		if a == s {
			m.rx.active = append(m.rx.active[:i], m.rx.active[i+1:]...)
			break
		}
	}
	if p := m.peers[s]; p != nil && p.dead == nil {
		p.dead = err
	}
	m.dropInflight(s)
	m.failGets(s, err)
	m.health.lost = append(m.health.lost, lostPeer{s, err})
}

// dropInflight gives back the fragments a lost receiver will never finish.
func (m *Module) dropInflight(d int) {
	m.tx.replenished++ // and sends to it meet its loss now, not a refusal
	m.tx.free = append(m.tx.free, m.tx.inflight[d]...)
	m.tx.inflightN -= len(m.tx.inflight[d])
	m.tx.inflight[d] = m.tx.inflight[d][:0]
}

func (m *Module) reportLost() int {
	lost := m.health.lost
	m.health.lost = nil
	m.st.peersLost += uint64(len(lost))
	if m.health.onLost != nil {
		for _, l := range lost {
			m.health.onLost(l.rank, l.err)
		}
	}
	return len(lost)
}

// housekeeping runs every 64 Progress calls: it publishes the counters
// and, at the liveness interval, checks on the peers.
func (m *Module) housekeeping() {
	m.st.flush()
	now := m.clock.Now()
	if !m.health.checkSoon && now-m.health.lastCheck < m.cfg.liveness {
		return
	}
	m.health.checkSoon = false
	m.health.lastCheck = now
	m.checkPeers()
}

// checkPeers looks at every connected peer: a segment its owner marked
// failed, or a process that exited without closing, is a lost peer; a
// segment marked closed ends sends to it quietly.
func (m *Module) checkPeers() {
	if len(m.health.pollFds) > 0 {
		for i := range m.health.pollFds {
			m.health.pollFds[i].Revents = 0
		}
		if _, err := unix.Poll(m.health.pollFds, 0); err != nil && !errors.Is(err, syscall.EINTR) {
			m.log.Debug().Err(err).Msg("poll pidfds")
		}
	}
	for i, p := range m.health.pollPeers {
		if p.dead != nil {
			continue
		}
		exited := m.health.pollFds[i].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
		m.checkPeer(p, exited)
	}
	// Peers in this process (tests) have no pidfd; their segment tells.
	for _, p := range m.peers {
		if p != nil && p.pidfd < 0 && p.dead == nil && p.rank != m.rank {
			m.checkPeer(p, false)
		}
	}
}

func (m *Module) checkPeer(p *peer, exited bool) {
	switch p.seg.state() {
	case stateClosed:
		p.dead = fmt.Errorf("sm: rank %d closed: %w", p.rank, core.ErrPeerLost)
		m.dropInflight(p.rank)
	case stateFailed:
		m.failPeer(p.rank, fmt.Errorf("sm: rank %d failed: %w", p.rank, core.ErrPeerLost))
	default:
		switch {
		case exited:
			m.failPeer(p.rank, fmt.Errorf("sm: rank %d (pid %d) died: %w", p.rank, p.pid, core.ErrPeerLost))
		case dropped(p.seg, m.rank):
			m.failPeer(p.rank, fmt.Errorf("sm: rank %d disconnected from this rank: %w", p.rank, core.ErrPeerLost))
		}
	}
}

// Disconnect drops rank (core.Module): its frames are dropped and sends
// to it fail from now on, and the control line of the box it writes into
// this rank's segment says so (drop), which the peer reads at its next
// liveness check and reports this rank lost. It reports rank lost here
// too, at the next Progress.
func (m *Module) Disconnect(rank int, reason error) {
	if m.closed || rank < 0 || rank >= m.size || rank == m.rank || m.rx.rxDead[rank] {
		return
	}
	drop(m.seg, rank)
	m.failPeer(rank, fmt.Errorf("sm: disconnected from rank %d: %v: %w", rank, reason, core.ErrPeerLost))
}

// Close announces that this rank is leaving, waits (up to close_timeout)
// for receivers to consume fragments in flight, and releases the segment.
func (m *Module) Close() error {
	if m.closed {
		return nil
	}
	atomic.StoreUint32(m.seg.u32(offState), stateClosed)
	deadline := time.Now().Add(m.cfg.closeTimeout)
	pause := 20 * time.Microsecond
	for m.tx.inflightN > 0 && time.Now().Before(deadline) {
		m.reclaim()
		m.checkPeers()
		if m.tx.inflightN == 0 {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
	if m.tx.inflightN > 0 {
		m.log.Warn().Int("fragments", m.tx.inflightN).Msg("closing with fragments not yet consumed")
	}
	m.closed = true
	m.st.flush()
	m.stopNotifications()
	return m.release()
}

// Abort marks this rank failed, as if the process had died: peers report
// it lost at their next liveness check. The module is closed.
func (m *Module) Abort() {
	if m.closed {
		return
	}
	atomic.StoreUint32(m.seg.u32(offState), stateFailed)
	m.closed = true
	m.stopNotifications()
	m.release()
}

// abandon undoes a half-made module.
func (m *Module) abandon() {
	m.closed = true
	m.release()
}

func (m *Module) release() error {
	first := m.Unlink()
	for _, seg := range m.attach.segs {
		if seg != nil {
			seg.unmap()
		}
	}
	for _, p := range m.peers {
		if p == nil {
			continue
		}
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
		}
		if p.seg != m.seg {
			p.seg.unmap()
		}
		if p.dead == nil {
			p.dead = fmt.Errorf("sm: %w", core.ErrClosed)
		}
	}
	if err := m.seg.unmap(); err != nil && first == nil {
		first = err
	}
	return first
}
