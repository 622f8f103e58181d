package softrc

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// Limits of a softrc device.
const (
	maxSGE      = 4
	maxQPWR     = 1 << 14
	maxCQE      = 1 << 20
	maxRdAtomic = 16
	maxSRQWR    = 1 << 16

	// directLinks is how many links a poll reads one by one before it
	// switches to one epoll_wait over all of them.
	directLinks = 4
	// acceptEvery makes every n-th direct poll an epoll_wait as well, so
	// that new connections are accepted while the process polls.
	acceptEvery = 64
	// activeWindow: the device goroutine leaves the wire to the process
	// when the process polled this recently.
	activeWindow = 5 * int64(time.Microsecond)
	// ackEvery: a responder acknowledges at once after this many requests.
	ackEvery = 16
)

// nicMaxSleep bounds one sleep of the device goroutine.
const nicMaxSleep = 50 * int64(time.Millisecond)

// spinOnEpoll makes every poll ask epoll which links have data instead of
// reading each link. With a few links, reading them is cheaper (one
// syscall per poll rather than epoll_wait and then read: ~1 us of
// latency between two processes here); above directLinks, and every
// acceptEvery polls to take new connections, the device asks epoll anyway.
var spinOnEpoll = false

var epoch = time.Now()

func nowNS() int64 { return int64(time.Since(epoch)) }

// Device is a softrc HCA. Its state is guarded by one mutex; the work a
// NIC does in hardware — reading and writing the wire, placing RDMA data,
// serving reads, acknowledging, retrying — runs inline in PostSend and CQ
// polls while the process polls, and in the device's own goroutine, which
// sleeps in epoll_wait, only after the process has not polled for
// IdleAfter. So a polling process pays no cross-thread wake-up per message
// (a Go netpoller wake costs ~37 µs across cores here), and a computing
// process still has its one-sided operations and solicited events served,
// which is what lets an RDMA-read rendezvous overlap (seed 004 §4.2–4.3).
type Device struct {
	prov *Provider
	name string
	cfg  DeviceConfig
	guid uint64

	mu     sync.Mutex
	refs   int
	closed bool
	ports  []*port
	pds    int
	mrs    map[uint32]*mr
	qps    map[uint32]*qp
	cqs    map[*cq]struct{}
	links  []*link
	byFD   map[int32]*link
	epfd   int
	evfd   int
	async  []verbs.AsyncEvent

	timerQPs     []*qp
	nextDeadline int64 // 0: no timer pending
	txPending    []*link

	lastPoll    int64
	polls       uint64
	nicEngaged  bool
	inNIC       bool  // the device goroutine holds d.mu
	nicUntil    int64 // when the sleeping device goroutine wakes by itself
	idleTimer   *time.Timer
	idleArmedAt int64
	idleAfter   int64
	ackDelay    int64
	done        chan struct{}
	nicDone     sync.WaitGroup
	pin         *nicPin // how the NIC thread was pinned (PinNIC), under mu

	// pacing: the device goroutine writes rate-limited links on time
	// while the process polls only now and then (pacer.go).
	pacing bool
	paceCh chan struct{}
	// engageCh hands the wire to the device goroutine at once, without
	// waiting for IdleAfter: a CQ was armed (engage). armedCQs counts
	// the CQs armed for an event: while there is one, the device
	// goroutine keeps the wire even while the process polls.
	engageCh chan struct{}
	armedCQs int

	iov     []unix.Iovec
	msg     unix.Msghdr // sendvNB's header
	evs     []unix.EpollEvent
	nicEvs  []unix.EpollEvent // the device goroutine's, used without d.mu
	trash   []byte
	stats   Stats
	noPoll2 bool

	// pending holds the accepted links still in the handshake (core's
	// limits on unauthenticated connections); lastReject says why the
	// latest link was rejected (auth.go).
	pending    core.Pending
	lastReject error
}

// Stats are a device's counters.
type Stats struct {
	// RNRNaksSent counts RNR NAKs this device sent as responder.
	RNRNaksSent int64
	// RNRNaksReceived counts RNR NAKs its requesters received.
	RNRNaksReceived int64
	// Retries counts retransmissions (after an RNR wait or an ACK timeout).
	Retries int64
	// TimeoutRetries counts the retransmissions caused by ACK timeouts.
	TimeoutRetries int64
	// BytesSent and BytesReceived count wire bytes, headers included.
	BytesSent     int64
	BytesReceived int64
	// PacketsSent and PacketsReceived count packets.
	PacketsSent     int64
	PacketsReceived int64
	// AcksSent counts explicit ACK packets; AcksPiggybacked counts ACKs
	// that rode on a request going the other way.
	AcksSent        int64
	AcksPiggybacked int64
	// ReadsOutstanding is the RDMA reads in flight now; ReadsOutstandingMax
	// the most ever.
	ReadsOutstanding    int64
	ReadsOutstandingMax int64
	// Drops counts packets dropped: no such QP, QP not ready, out of
	// sequence, UD without a posted buffer.
	Drops int64
	// FaultDrops counts packets the DropPackets fault hook lost.
	FaultDrops int64
	// LinkFailures counts links that failed or were dropped.
	LinkFailures int64
	// LinksRejected counts links closed because they did not prove they
	// belong to the job (a wrong proof, a packet out of turn or malformed
	// before the proof, no proof in time); they never reached a QP.
	LinksRejected int64
	// ForeignPackets counts packets dropped because they came for a
	// connected QP from a port or QP that is not its peer.
	ForeignPackets int64
	// NICEngagements counts how often the device goroutine took over the
	// wire; NICWakeups how often it woke while in charge; NICIdleChecks
	// how often its idle timer woke it while the process still polled
	// (a wake-up for nothing, which costs the ranks CPU).
	NICEngagements int64
	NICWakeups     int64
	NICIdleChecks  int64
	// WritesBlocked counts writes the socket took only in part (its
	// buffer was full): the rest goes when epoll reports room.
	WritesBlocked int64
	// Writes counts send calls (sendto, sendmsg) that moved bytes;
	// SendsBatched the sends PostSend left for the next poll to write
	// with others.
	Writes, SendsBatched int64
	// Reads counts read calls that moved bytes, EmptyReads those that
	// found nothing; Epolls counts the non-blocking epoll_waits of polls.
	// With Writes they are the system calls a message costs.
	Reads, EmptyReads, Epolls int64
	// StagedBytes counts payload bytes that went through a link's
	// receive buffer (a copy) instead of being read straight into place.
	StagedBytes int64
}

func newDevice(p *Provider, name string, cfg DeviceConfig) (*Device, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("softrc: %s: epoll_create1: %w", name, err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("softrc: %s: eventfd: %w", name, err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, fmt.Errorf("softrc: %s: epoll_ctl: %w", name, err)
	}
	d := &Device{
		prov: p, name: name, cfg: cfg, guid: guidOf(name), refs: 1,
		mrs: map[uint32]*mr{}, qps: map[uint32]*qp{}, cqs: map[*cq]struct{}{},
		byFD: map[int32]*link{}, epfd: epfd, evfd: evfd,
		idleAfter: int64(cfg.IdleAfter), ackDelay: int64(cfg.AckDelay),
		done:     make(chan struct{}),
		paceCh:   make(chan struct{}, 1),
		engageCh: make(chan struct{}, 1),
		iov:      make([]unix.Iovec, 0, 64),
		evs:      make([]unix.EpollEvent, 64),
		nicEvs:   make([]unix.EpollEvent, 1),
		trash:    make([]byte, 64<<10),
	}
	d.ports = make([]*port, cfg.Ports)
	for i := range d.ports {
		d.ports[i] = &port{d: d, num: uint8(i + 1), listenFD: -1}
	}
	d.idleTimer = time.NewTimer(cfg.IdleAfter)
	d.idleArmedAt = nowNS()
	d.nicDone.Add(1)
	go d.nic()
	return d, nil
}

// Name returns the device name.
func (d *Device) Name() string { return d.name }

// Query returns the device attributes.
func (d *Device) Query() (verbs.DeviceAttr, error) {
	return verbs.DeviceAttr{
		FWVer: "softrc-1", NodeGUID: d.guid, VendorID: 0x5352, VendorPartID: 1,
		PhysPortCnt: len(d.ports), MaxMRSize: 1 << 40,
		MaxQP: 1 << 16, MaxQPWR: maxQPWR, MaxSGE: maxSGE, MaxCQ: 1 << 12, MaxCQE: maxCQE,
		MaxMR: 1 << 20, MaxPD: 1 << 10, MaxQPRdAtom: maxRdAtomic, MaxQPInitRdAtom: maxRdAtomic,
		MaxSRQ: 1 << 12, MaxSRQWR: maxSRQWR, MaxSRQSGE: maxSGE,
	}, nil
}

// QueryPort returns a port's attributes, starting the port (its TCP
// listener) on first use.
func (d *Device) QueryPort(num uint8) (verbs.PortAttr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.portLocked(num)
	if err != nil {
		return verbs.PortAttr{}, err
	}
	return p.attr(), nil
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (verbs.PD, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("softrc: %s: %w", d.name, verbs.ErrClosed)
	}
	d.pds++
	return &pd{d: d}, nil
}

// PollAsyncEvent returns the next async event without blocking.
func (d *Device) PollAsyncEvent() (verbs.AsyncEvent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.async) == 0 {
		return verbs.AsyncEvent{}, false
	}
	ev := d.async[0]
	copy(d.async, d.async[1:])
	d.async = d.async[:len(d.async)-1]
	return ev, true
}

func (d *Device) raise(ev verbs.AsyncEvent) { d.async = append(d.async, ev) }

// Stats returns a snapshot of the device's counters.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Close drops one reference; the last closes the device's ports and
// links and stops its goroutine.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.refs--
	if d.refs > 0 {
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	d.prov.forget(d)
	d.shutdown()
	return nil
}

func (d *Device) shutdown() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	close(d.done)
	d.kick()
	d.nicDone.Wait()
	d.idleTimer.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range append([]*link(nil), d.links...) {
		d.linkFailed(l, fmt.Errorf("device closed"), nowNS())
	}
	for _, p := range d.ports {
		p.stopListening()
		p.bucket.close()
	}
	unix.Close(d.epfd)
	unix.Close(d.evfd)
}

// kick wakes the device goroutine out of epoll_wait.
func (d *Device) kick() {
	var one = [8]byte{1}
	unix.Write(d.evfd, one[:])
}

func (d *Device) configurePort(num uint8, pc PortConfig) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if num < 1 || int(num) > len(d.ports) {
		return fmt.Errorf("softrc: %s has %d ports, no port %d: %w", d.name, len(d.ports), num, verbs.ErrNoDevice)
	}
	p := d.ports[num-1]
	if p.started || p.configured {
		if p.cfg != pc {
			return fmt.Errorf("softrc: %s port %d is configured as %+v, cannot change it to %+v", d.name, num, p.cfg, pc)
		}
		return nil
	}
	p.cfg = pc
	p.configured = true
	return nil
}

func (d *Device) portLocked(num uint8) (*port, error) {
	if d.closed {
		return nil, fmt.Errorf("softrc: %s: %w", d.name, verbs.ErrClosed)
	}
	if num < 1 || int(num) > len(d.ports) {
		return nil, fmt.Errorf("softrc: %s has %d ports, no port %d: %w", d.name, len(d.ports), num, verbs.ErrNoDevice)
	}
	p := d.ports[num-1]
	if !p.started && !p.down {
		if err := p.start(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ---- the engine ----

// pollEnter notes that the process polls, and keeps the idle timer that
// hands the wire to the device goroutine pushed out while it does. The
// timer is re-armed at most every IdleAfter/2, so a polling process costs
// no wake-ups at all.
//
// A process that polls again within activeWindow of its last poll is
// spinning: it takes the wire back from the device goroutine here, rather
// than wait for that goroutine to notice. The goroutine notices only when
// it wakes, and it must then win d.mu from the spinning process and run
// within activeWindow of that process's last poll — on a busy host it
// seldom does, and stays in charge: every packet then wakes it as well as
// the process, and the process pays an epoll_wait before each read. A
// process that polls now and then leaves it in charge, so that its
// one-sided operations still progress between polls.
func (d *Device) pollEnter() int64 {
	now := nowNS()
	if d.nicEngaged && now-d.lastPoll < activeWindow && d.armedCQs == 0 {
		d.nicEngaged = false
	}
	d.lastPoll = now
	d.polls++
	if now-d.idleArmedAt > d.idleAfter/2 {
		d.idleTimer.Reset(time.Duration(d.idleAfter))
		d.idleArmedAt = now
	}
	return now
}

// progress does one round of device work: read what arrived, fire due
// timers, write what is queued.
func (d *Device) progress(now int64) {
	if !spinOnEpoll && len(d.links) <= directLinks && d.polls%acceptEvery != 0 && !d.nicEngaged {
		for i := 0; i < len(d.links); i++ {
			l := d.links[i]
			if !l.dead && !l.spare {
				l.receive(now)
			}
		}
	} else {
		d.pollEpoll(now)
	}
	if d.nextDeadline != 0 && now >= d.nextDeadline {
		d.runTimers(now)
	}
	d.flushAll(now)
}

// pollEpoll serves whatever epoll reports ready. Called with d.mu held.
func (d *Device) pollEpoll(now int64) {
	n, err := d.epollWait()
	if err != nil || n <= 0 {
		return
	}
	d.serveEvents(n, now)
}

// sleep blocks the device goroutine in epoll_wait until something is
// ready or timeout (ns, <0 forever) passes; the work is done by the
// progress that follows, under d.mu.
func (d *Device) sleep(timeout int64) {
	evs := d.nicEvs
	if d.noPoll2 {
		ms := -1
		if timeout > 0 {
			ms = int((timeout + 999_999) / 1_000_000)
		}
		unix.EpollWait(d.epfd, evs, ms)
		return
	}
	var ts *unix.Timespec
	var t unix.Timespec
	if timeout > 0 {
		t = unix.NsecToTimespec(timeout)
		ts = &t
	}
	_, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(d.epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), uintptr(unsafe.Pointer(ts)), 0, 0)
	if e == unix.ENOSYS {
		d.noPoll2 = true
	}
}

// epollWait polls the device's epoll set without blocking. It is
// epoll_pwait with no signal mask, which is epoll_wait on every
// architecture (arm64 has no epoll_wait).
func (d *Device) epollWait() (int, error) {
	d.stats.Epolls++
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(d.epfd), uintptr(unsafe.Pointer(&d.evs[0])), uintptr(len(d.evs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func (d *Device) serveEvents(n int, now int64) {
	for i := 0; i < n; i++ {
		ev := d.evs[i]
		fd := ev.Fd
		if int(fd) == d.evfd {
			// Only the device goroutine drains its doorbell: a poller
			// that drained it could take the kick from the sleeping
			// goroutine, which would then sleep on.
			if d.inNIC {
				var b [8]byte
				unix.Read(d.evfd, b[:])
			}
			continue
		}
		if l := d.byFD[fd]; l != nil {
			if l.dead {
				continue
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP|unix.EPOLLRDHUP) != 0 {
				l.receive(now)
			}
			if !l.dead && ev.Events&unix.EPOLLOUT != 0 {
				l.flush(now)
			}
			continue
		}
		for _, p := range d.ports {
			if p.started && int(fd) == p.listenFD {
				p.accept(now)
			}
		}
	}
}

func (d *Device) flushAll(now int64) {
	for i := 0; i < len(d.txPending); {
		l := d.txPending[i]
		// A link whose socket was full waits for epoll to report it
		// writable instead of retrying a write on every poll.
		if !l.dead && !l.outArmed {
			l.flush(now)
		}
		if l.dead || l.txLen() == 0 {
			l.pending = false
			d.txPending[i] = d.txPending[len(d.txPending)-1]
			d.txPending = d.txPending[:len(d.txPending)-1]
			continue
		}
		i++
	}
}

// setDeadline makes sure the engine looks at its timers by t.
func (d *Device) setDeadline(t int64) {
	if d.nextDeadline == 0 || t < d.nextDeadline {
		d.nextDeadline = t
		if d.nicEngaged && t < d.nicUntil {
			d.kick()
		}
	}
}

func (d *Device) addTimerQP(q *qp) {
	if !q.timerListed {
		q.timerListed = true
		d.timerQPs = append(d.timerQPs, q)
	}
}

// runTimers fires due QP timers (delayed ACKs, RNR waits, ACK timeouts)
// and recomputes the next deadline, counting the links' own deadlines
// (rate shaping, injected delay).
func (d *Device) runTimers(now int64) {
	// Timers set while these run (a retransmission written, a token
	// shortage) lower d.nextDeadline through setDeadline; merge them.
	d.nextDeadline = 0
	next := int64(0)
	min := func(t int64) {
		if t != 0 && (next == 0 || t < next) {
			next = t
		}
	}
	for i := 0; i < len(d.timerQPs); {
		q := d.timerQPs[i]
		q.onTimer(now)
		t := q.deadline()
		if t == 0 {
			q.timerListed = false
			d.timerQPs[i] = d.timerQPs[len(d.timerQPs)-1]
			d.timerQPs = d.timerQPs[:len(d.timerQPs)-1]
			continue
		}
		min(t)
		i++
	}
	for _, l := range d.links {
		if !l.dead && l.txLen() > 0 {
			l.flush(now)
			min(l.txReadyAt)
		}
	}
	if next != 0 && (d.nextDeadline == 0 || next < d.nextDeadline) {
		d.nextDeadline = next
	}
}

// nic is the device goroutine: the NIC that keeps serving the wire while
// the process does not poll (seed 004's asynchronous progress needs it for
// one-sided operations and solicited events).
func (d *Device) nic() {
	defer d.nicDone.Done()
	if d.cfg.PinNIC {
		p := pin(d.cfg.NICCPU)
		d.mu.Lock()
		d.pin = &p
		d.mu.Unlock()
		// The thread ends with the goroutine (it stays locked): the CPU
		// goes back to the threads that were kept off it.
		defer p.unpin()
	}
	for {
		now, ok := d.waitIdle()
		if !ok {
			return
		}
		d.nicEngaged = true
		d.stats.NICEngagements++
		if !d.serve(now) {
			return
		}
		d.mu.Unlock()
	}
}

// waitIdle waits until the device goroutine takes the wire: the process
// has not polled for IdleAfter, or a CQ was armed (engage). It returns
// with d.mu held, or false once the device closed (d.mu not held).
func (d *Device) waitIdle() (int64, bool) {
	for {
		armed := false
		select {
		case <-d.idleTimer.C:
		case <-d.engageCh:
			armed = true
		case <-d.paceCh:
			if !d.paceLinks() {
				return 0, false
			}
			continue
		case <-d.done:
			return 0, false
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return 0, false
		}
		now := nowNS()
		if idle := now - d.lastPoll; idle < d.idleAfter && !armed {
			d.stats.NICIdleChecks++
			d.idleTimer.Reset(time.Duration(d.idleAfter - idle))
			d.idleArmedAt = now
			d.mu.Unlock()
			continue
		}
		return now, true
	}
}

// serve is the engaged device goroutine's loop (d.mu held): it serves
// the wire until the process polls again, and returns false, d.mu not
// held, once the device closed.
func (d *Device) serve(now int64) bool {
	for {
		d.inNIC = true
		d.progress(now)
		d.flushAcks(now)
		d.flushAll(now)
		d.inNIC = false
		// Sleep until something is ready, the next timer, or at most
		// nicMaxSleep: a backstop against a wake-up that never comes.
		timeout := int64(nicMaxSleep)
		if d.nextDeadline != 0 {
			timeout = min(timeout, max(d.nextDeadline-now, 1000))
		}
		d.nicUntil = now + timeout
		d.mu.Unlock()
		d.sleep(timeout)
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return false
		}
		now = nowNS()
		d.stats.NICWakeups++
		if !d.nicEngaged || now-d.lastPoll < activeWindow && d.armedCQs == 0 {
			// The process is polling again: the wire is its own.
			d.nicEngaged = false
			d.idleTimer.Reset(time.Duration(d.idleAfter))
			d.idleArmedAt = now
			return true
		}
	}
}

// engage hands the wire to the device goroutine now rather than after
// IdleAfter (d.mu held): a CQ armed for an event means that its consumer
// — a progress thread (seed 004 §4.3) — stops polling and sleeps until
// the device raises one, which a device that waited for IdleAfter on a Go
// timer (a millisecond and more when no P is about) raised that late. A
// process that polls again takes the wire back (pollEnter).
func (d *Device) engage() {
	if d.nicEngaged || d.closed {
		return
	}
	select {
	case d.engageCh <- struct{}{}:
	default:
	}
}

// flushAcks sends every delayed ACK now: with nobody polling there is no
// reply to piggyback them on.
func (d *Device) flushAcks(now int64) {
	for _, q := range d.timerQPs {
		if q.ackPending {
			q.sendAck(now)
		}
	}
}

func (d *Device) markTx(l *link) {
	if !l.pending {
		l.pending = true
		d.txPending = append(d.txPending, l)
	}
}
