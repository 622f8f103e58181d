// Package softnic is a software EXTOLL card: the nic.Device interface with
// the hardware's semantics (seed 003 §2–3), built from shared memory and
// sockets.
//
// VELO: each process owns one mailbox, a ring of 64-byte slots (package
// mailbox) in a file under /dev/shm. A sender on the same host maps the
// receiver's mailbox and writes packets into it directly — the programmed
// write of the real card. A sender on another host streams packets over
// TCP to the receiver's network engine, a goroutine that writes them into
// the mailbox; when the mailbox is full the engine stops reading the socket,
// so the kernel's windows fill and the sender's writes block. Either way a
// full mailbox blocks the sender, as back-pressure does on the real network:
// there is no end-to-end flow control below the software. A blocked Send
// gives up after the configured stall bound with an error wrapping
// core.ErrStalled, so that a job without software flow control reports the
// stall instead of hanging.
//
// RMA: registered memory is entered in an address-translation table under
// a random 64-bit key. Put and Get go to the target's RMA engine over a
// unix socket (same host) or TCP; the engine checks the key, the bounds and
// the access rights, moves the data without the target process calling in —
// as the card's RMA unit does — and raises notifications at the origin and,
// on request, at the target. On one host the table is also published in
// shared memory, and an operation that needs no target notification is
// checked against it and done by the origin in one cross-memory copy
// (process_vm_readv/writev; see cma.go).
//
// Nobody else on the host reaches the card (issue 30 items 1 and 4). Its
// files — mailbox and table — are made and opened as package jobfile
// makes a job's files: exclusively, 0600, through no link, checked by
// fstat, their pages reserved, under names with a random part that peers
// read from the published address; the RMA engine's abstract unix socket
// has a random name too. A cross-memory copy goes ahead only where the
// peer's table entry agrees with the region its key names (address and
// length), so a rewritten table aims no copy. Every engine proves its
// connections belong to the job (auth.go) and holds at most
// core.MaxPending that have not yet, for core.PendingTimeout at most
// (core.Pending); an accept that fails is waited out and the engine
// serves on.
package softnic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/mailbox"
	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/jobfile"
)

// Transport chooses how VELO packets reach a peer.
type Transport uint8

const (
	// Auto uses shared memory for peers on this host and TCP otherwise.
	Auto Transport = iota
	// SHM insists on shared memory.
	SHM
	// TCP sends over TCP even to peers on this host (tests, experiments).
	TCP
)

// ParseTransport reads "auto", "shm" or "tcp".
func ParseTransport(s string) (Transport, error) {
	switch s {
	case "", "auto":
		return Auto, nil
	case "shm":
		return SHM, nil
	case "tcp":
		return TCP, nil
	}
	return 0, fmt.Errorf("softnic: transport %q, want auto, shm or tcp", s)
}

// Addr is what a device publishes so that peers can reach it.
type Addr struct {
	Host    string `json:"host"`     // host identity: peers with the same one use shared memory
	Mailbox string `json:"mailbox"`  // path of the mailbox file
	VELO    string `json:"velo"`     // TCP address of the network engine
	RMAUnix string `json:"rma_unix"` // unix socket of the RMA engine
	RMATCP  string `json:"rma_tcp"`  // TCP address of the RMA engine
	ATT     string `json:"att"`      // the address-translation table in shared memory
	Pid     int    `json:"pid"`      // the process, for cross-memory attach
	// Extra is for the software above the card (the BTL publishes its
	// flow-control layout there, which every rank must share).
	Extra string `json:"extra,omitempty"`
}

// Encode returns the address blob.
func (a Addr) Encode() []byte { b, _ := json.Marshal(a); return b }

// DecodeAddr parses an address blob.
func DecodeAddr(b []byte) (Addr, error) {
	var a Addr
	if err := json.Unmarshal(b, &a); err != nil {
		return Addr{}, fmt.Errorf("softnic: bad address blob: %w", err)
	}
	if a.Mailbox == "" || a.VELO == "" || a.RMATCP == "" {
		return Addr{}, fmt.Errorf("softnic: address blob %q is incomplete", b)
	}
	return a, nil
}

// Config configures a device.
type Config struct {
	Rank, Size int
	// JobID and Name make file and socket names unique on the host.
	JobID, Name string
	// Slots is the size of this process's mailbox.
	Slots int
	// Dir holds the mailbox file and the RMA socket (default /dev/shm).
	Dir string
	// ListenHost is the interface the TCP engines listen on and publish
	// (default 127.0.0.1; use the host's address between hosts).
	ListenHost string
	// HostID overrides the host identity (default hostname + boot id), to
	// pretend ranks of one machine are on different hosts.
	HostID    string
	Transport Transport
	// StallTimeout bounds how long a Send waits on a full mailbox: 0 waits
	// forever (the hardware), a negative value fails at once.
	StallTimeout time.Duration
	// SocketBuffer sets SO_SNDBUF/SO_RCVBUF of VELO TCP connections, to
	// keep the slack between a full mailbox and a blocked sender small.
	SocketBuffer int
	// Resolve returns a peer's published address.
	Resolve func(ctx context.Context, rank int) (Addr, error)
	// ConnectTimeout bounds Resolve and dialing (default 30s).
	ConnectTimeout time.Duration
	Clock          core.Clock
	// Metrics receives the device's counters, named Prefix + ".stalls" etc.
	Metrics *core.Metrics
	Prefix  string
	// Key is the job's secret: every connection to the card's engines
	// proves with it that it belongs to the job (auth.go). Open fails
	// without one.
	Key *core.JobKey
	// OnReject, if set, hears of every connection that failed to prove
	// it (from the engines' goroutines).
	OnReject func(error)

	// maxPending and pendingTimeout, for the tests, replace core's
	// limits on connections in the handshake (core.MaxPending,
	// core.PendingTimeout).
	maxPending     int
	pendingTimeout time.Duration
}

// Device is a software EXTOLL card for one process.
type Device struct {
	cfg   Config
	clock core.Clock
	box   *mailbox.Ring
	mem   []byte // the mapping of our own mailbox
	path  string
	addr  Addr

	peers []peer

	veloLn   net.Listener
	rmaUnix  net.Listener
	rmaTCP   net.Listener
	att      att
	notes    queue[nic.Notification]
	lost     queue[nic.PeerLoss]
	accepted sync.Map // net.Conn -> *served
	wg       sync.WaitGroup
	acceptWG sync.WaitGroup
	done     chan struct{}
	closed   atomic.Bool

	// blocked counts Sends that found a mailbox full, blockedNS the time
	// they waited, stalls the waits that hit the stall bound.
	blocked, blockedNS, stalls *core.Counter
	// cmaOps counts RMA operations done by cross-memory attach.
	cmaOps *core.Counter
	// accepts counts accepted connections, rejected those that failed
	// the handshake, acceptErrs the accepts that failed (out of
	// descriptors, say).
	accepts, rejected, acceptErrs *core.Counter
	// pending holds the accepted connections still in the handshake,
	// for all three engines (core's limits on unauthenticated
	// connections).
	pending core.Pending
	satt    *sharedATT
}

type peerKind uint8

const (
	unconnected peerKind = iota
	viaSHM
	viaTCP
	failed
)

type peer struct {
	kind peerKind
	addr Addr
	ring *mailbox.Ring
	mem  []byte
	conn net.Conn
	wbuf []byte
	rma  *rmaConn
	att  []byte // the peer's shared address-translation table
	cma  int8   // cross-memory attach to the peer: 0 untried, 1 works, -1 not possible
	err  error
}

// Open creates this process's mailbox and starts its engines. Publish
// Addr() before peers connect.
func Open(cfg Config) (*Device, error) {
	if cfg.Size <= 0 || cfg.Rank < 0 || cfg.Rank >= cfg.Size || cfg.Size-1 > nic.MaxRank {
		return nil, fmt.Errorf("softnic: rank %d of %d is out of range", cfg.Rank, cfg.Size)
	}
	if cfg.Resolve == nil {
		return nil, errors.New("softnic: no Resolve function")
	}
	if cfg.Key == nil {
		return nil, fmt.Errorf("softnic: %w (Config.Key)", core.ErrNoJobKey)
	}
	if cfg.Dir == "" {
		cfg.Dir = "/dev/shm"
	}
	if cfg.ListenHost == "" {
		cfg.ListenHost = "127.0.0.1"
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock
	}
	if cfg.Metrics == nil {
		cfg.Metrics = core.NewMetrics()
	}
	if cfg.HostID == "" {
		cfg.HostID = hostID()
	}
	d := &Device{
		cfg:        cfg,
		clock:      cfg.Clock,
		peers:      make([]peer, cfg.Size),
		done:       make(chan struct{}),
		blocked:    cfg.Metrics.Counter(core.MetricName(cfg.Prefix, "velo_blocked")),
		blockedNS:  cfg.Metrics.Counter(core.MetricName(cfg.Prefix, "velo_blocked_ns")),
		stalls:     cfg.Metrics.Counter(core.MetricName(cfg.Prefix, "velo_stalls")),
		cmaOps:     cfg.Metrics.Counter(core.MetricName(cfg.Prefix, "rma_cma_ops")),
		rejected:   cfg.Metrics.Counter(core.MetricName(cfg.Prefix, "links_rejected")),
		acceptErrs: cfg.Metrics.Counter(core.MetricName(cfg.Prefix, "accept_errors")),
		accepts:    cfg.Metrics.Counter(core.MetricName(cfg.Prefix, "links_accepted")),
	}
	d.pending.Max, d.pending.Timeout = cfg.maxPending, cfg.pendingTimeout
	d.att.init()
	// The job's prefix lets the launcher remove what a crash left; the
	// random part createMapping adds keeps anyone from making the file
	// first (issue 30: another user pre-created both and kept them open).
	base := fmt.Sprintf("gobtl-%s-extoll-%s-%d-", sanitize(cfg.JobID), sanitize(cfg.Name), cfg.Rank)
	mem, path, err := createMapping(cfg.Dir, base, ".mbox", mailbox.Size(cfg.Slots))
	if err != nil {
		return nil, fmt.Errorf("softnic: mailbox: %w", err)
	}
	d.mem, d.path = mem, path
	if d.box, err = mailbox.Format(mem, cfg.Slots); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.listen(); err != nil {
		d.Close()
		return nil, err
	}
	if d.satt, err = openSharedATT(cfg.Dir, base); err != nil {
		d.Close()
		return nil, fmt.Errorf("softnic: address-translation table: %w", err)
	}
	d.addr = Addr{
		Host:    cfg.HostID,
		Mailbox: d.path,
		VELO:    d.veloLn.Addr().String(),
		RMAUnix: d.rmaUnix.Addr().String(),
		RMATCP:  d.rmaTCP.Addr().String(),
		ATT:     d.satt.path,
		Pid:     os.Getpid(),
	}
	return d, nil
}

func (d *Device) listen() error {
	var err error
	hostPort := net.JoinHostPort(d.cfg.ListenHost, "0")
	if d.veloLn, err = net.Listen("tcp", hostPort); err != nil {
		return fmt.Errorf("softnic: velo listener: %w", err)
	}
	d.veloLn = wrapListener(d.veloLn)
	if d.rmaUnix, err = listenAbstract(); err != nil {
		return fmt.Errorf("softnic: rma listener: %w", err)
	}
	d.rmaUnix = wrapListener(d.rmaUnix)
	if d.rmaTCP, err = net.Listen("tcp", hostPort); err != nil {
		return fmt.Errorf("softnic: rma listener: %w", err)
	}
	d.rmaTCP = wrapListener(d.rmaTCP)
	d.serve(d.veloLn, false, d.veloEngine)
	d.serve(d.rmaUnix, true, d.rmaEngine)
	d.serve(d.rmaTCP, true, d.rmaEngine)
	return nil
}

// listenAbstract listens on a unix socket in the abstract namespace (no
// file to clean up, no limit from the length of Dir) under a random
// name, taking another where one is taken: any process of the host may
// bind an abstract name, so a name derived from the job could be taken
// first. Peers learn the name from the published address, and whoever
// connects proves it belongs to the job before anything else (auth.go).
func listenAbstract() (net.Listener, error) {
	var err error
	for range 16 {
		var ln net.Listener
		if ln, err = net.Listen("unix", "@gobtl-extoll-"+jobfile.Random()); err == nil {
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return nil, err
}

// wrapListener lets the tests put a listener that fails in front of each
// engine's.
var wrapListener = func(ln net.Listener) net.Listener { return ln }

// served is an accepted connection.
type served struct {
	rma  bool
	pend *core.PendingConn // in d.pending until its handshake ends
	mu   sync.Mutex        // guards writes
}

// serve accepts connections on ln and runs handle on each in a goroutine.
// A connection is pending (d.pending) until it has proved it belongs to
// the job: the oldest goes when core.MaxPending wait, so a flood of
// connections from outside costs a bounded number of descriptors. An
// accept that fails — out of descriptors, say — is waited out
// (core.AcceptRetry), and the listener serves on: it stops only when the
// device closes.
func (d *Device) serve(ln net.Listener, rma bool, handle func(net.Conn, *served)) {
	d.acceptWG.Add(1)
	go func() {
		defer d.acceptWG.Done()
		var retry core.AcceptRetry
		for {
			c, err := ln.Accept()
			if err != nil {
				if d.closed.Load() || errors.Is(err, net.ErrClosed) {
					return
				}
				d.acceptErrs.Inc()
				select {
				case <-d.done:
					return
				case <-time.After(retry.Next()):
				}
				continue
			}
			retry.Reset()
			d.accepts.Inc()
			sv := &served{rma: rma}
			sv.pend = d.pending.Admit(d.clock.Now(), func() { c.Close() })
			d.accepted.Store(c, sv)
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer d.accepted.Delete(c)
				defer c.Close()
				defer sv.pend.Done()
				handle(c, sv)
			}()
		}
	}()
}

// Addr is what peers need to reach this device.
func (d *Device) Addr() Addr { return d.addr }

// SetExtra sets the Extra field of the published address.
func (d *Device) SetExtra(s string) { d.addr.Extra = s }

// PeerAddr is the address rank published, once connected.
func (d *Device) PeerAddr(rank int) (Addr, bool) {
	if rank < 0 || rank >= len(d.peers) || d.peers[rank].kind == unconnected || d.peers[rank].kind == failed {
		return Addr{}, false
	}
	return d.peers[rank].addr, true
}

// Rank is this process's rank.
func (d *Device) Rank() int { return d.cfg.Rank }

// Size is the number of ranks.
func (d *Device) Size() int { return d.cfg.Size }

// Slots is the size of this process's mailbox.
func (d *Device) Slots() int { return d.cfg.Slots }

// Occupancy is how many slots of this process's mailbox are in use.
func (d *Device) Occupancy() int { return d.box.Len() }

// Lost returns the next peer found dead.
func (d *Device) Lost() (nic.PeerLoss, bool) { return d.lost.pop() }

// Connect sets up the connection to rank now rather than at first use; it
// also opens the RMA connection, whose loss reveals the peer's death.
func (d *Device) Connect(rank int) error {
	p, err := d.peer(rank)
	if err != nil {
		return err
	}
	_, err = d.rmaTo(rank, p)
	return err
}

func (d *Device) peer(rank int) (*peer, error) {
	if rank < 0 || rank >= d.cfg.Size {
		return nil, fmt.Errorf("softnic: rank %d of %d: %w", rank, d.cfg.Size, core.ErrUnreachable)
	}
	p := &d.peers[rank]
	switch p.kind {
	case viaSHM, viaTCP:
		return p, nil
	case failed:
		return nil, p.err
	}
	if d.closed.Load() {
		return nil, fmt.Errorf("softnic: %w", core.ErrClosed)
	}
	if err := d.connect(rank, p); err != nil {
		p.kind, p.err = failed, fmt.Errorf("softnic: connect rank %d: %w", rank, err)
		return nil, p.err
	}
	return p, nil
}

func (d *Device) connect(rank int, p *peer) error {
	if rank == d.cfg.Rank {
		p.addr, p.ring, p.kind = d.addr, d.box, viaSHM
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ConnectTimeout)
	defer cancel()
	a, err := d.cfg.Resolve(ctx, rank)
	if err != nil {
		return err
	}
	p.addr = a
	local := a.Host == d.addr.Host
	switch {
	case d.cfg.Transport == SHM && !local:
		return fmt.Errorf("transport shm, but rank %d is on host %q: %w", rank, a.Host, core.ErrUnreachable)
	case d.cfg.Transport == TCP || !local:
		return d.dialVELO(ctx, rank, p)
	}
	mem, err := openMapping(a.Mailbox, mailbox.Size(mailbox.MinSlots))
	if err != nil {
		return err
	}
	ring, err := mailbox.Attach(mem)
	if err != nil {
		unmap(mem)
		return err
	}
	p.mem, p.ring, p.kind = mem, ring, viaSHM
	return nil
}

// Attach connects to every peer on this host now — it maps their
// mailboxes and address-translation tables — so that Unlink may remove
// the names of the files (core.Attacher). Peers on other hosts, or any
// peer under transport tcp, connect at first use as before; a peer that
// cannot be reached fails then, saying why.
func (d *Device) Attach(ctx context.Context) error {
	if d.cfg.Transport == TCP {
		return nil
	}
	for r := range d.cfg.Size {
		if r == d.cfg.Rank || d.peers[r].kind != unconnected {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, d.cfg.ConnectTimeout)
		a, err := d.cfg.Resolve(rctx, r)
		cancel()
		if err != nil || a.Host != d.addr.Host {
			continue
		}
		if p, err := d.peer(r); err == nil && p.addr.ATT != "" && p.addr.Pid > 0 {
			mapATT(p)
		}
	}
	return nil
}

// Unlink removes this device's mailbox and address-translation table
// files; the peers on this host have mapped them (core.Attacher).
func (d *Device) Unlink() error {
	var errs []error
	for _, path := range []string{d.path, d.satt.path} {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("softnic: unlink: %w", err))
		}
	}
	return errors.Join(errs...)
}

// fail marks rank lost with err and reports it once.
func (d *Device) fail(rank int, err error) {
	d.lost.push(nic.PeerLoss{Rank: rank, Err: err})
}

// Close stops the engines, unmaps the mailboxes and removes this process's
// files. Peers are told goodbye, so they do not report this rank lost.
func (d *Device) Close() error { return d.shutdown(true) }

// Abort stops the device as if the process had died: connections drop
// without a goodbye, and peers report this rank lost.
func (d *Device) Abort() { d.shutdown(false) }

func (d *Device) shutdown(bye bool) error {
	if d.closed.Swap(true) {
		return nil
	}
	close(d.done)
	if bye {
		d.sayBye()
	}
	for _, ln := range []net.Listener{d.veloLn, d.rmaUnix, d.rmaTCP} {
		if ln != nil {
			ln.Close()
		}
	}
	d.acceptWG.Wait()
	// Network engines stop at once; RMA engines end when their origins,
	// told goodbye, hang up (or after a grace period).
	d.accepted.Range(func(k, v any) bool {
		if c := k.(net.Conn); !v.(*served).rma || !bye {
			c.Close()
		} else {
			c.SetReadDeadline(time.Now().Add(time.Second))
		}
		return true
	})
	for i := range d.peers {
		p := &d.peers[i]
		if p.conn != nil {
			p.conn.Close()
		}
		if p.rma != nil {
			p.rma.close()
		}
	}
	d.wg.Wait()
	for i := range d.peers {
		p := &d.peers[i]
		if p.mem != nil {
			unmap(p.mem)
			p.mem = nil
		}
		if p.att != nil {
			unmap(p.att)
			p.att = nil
		}
	}
	if d.satt != nil {
		d.satt.close()
	}
	if d.mem != nil {
		unmap(d.mem)
		d.mem = nil
		os.Remove(d.path)
	}
	return nil
}

// backoff waits a little longer each round: spin, yield, then sleep from a
// microsecond up to a millisecond, so that a blocked sender leaves the cores
// to the processes it waits for.
type backoff struct{ n int }

func (b *backoff) wait() {
	b.n++
	switch {
	case b.n < 16:
	case b.n < 64:
		runtimeGosched()
	default:
		d := time.Microsecond << min(b.n-64, 10)
		time.Sleep(d)
	}
}

func sanitize(s string) string {
	if s == "" {
		return "0"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

func hostID() string {
	h, _ := os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		h += "/" + strings.TrimSpace(string(b))
	}
	return h
}

// queue is a mutex-protected FIFO with a lock-free emptiness check, for
// events made by engine goroutines and consumed by Progress.
type queue[T any] struct {
	n     atomic.Int32
	mu    sync.Mutex
	items []T
	head  int
}

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.n.Add(1)
	q.mu.Unlock()
}

func (q *queue[T]) pop() (T, bool) {
	var zero T
	if q.n.Load() == 0 {
		return zero, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return zero, false
	}
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.n.Add(-1)
	return v, true
}
