package softrc

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/btl/netif"
	"github.com/gobtl/gobtl/core"
)

// port is one port of a device: a TCP listener whose address is the
// port's identity (the GID is its IP address, IPv4-mapped, and the LID its
// TCP port number, as RoCE derives GIDs from IP addresses), a link rate
// shared by every link leaving it, and the links themselves.
type port struct {
	d          *Device
	num        uint8
	cfg        PortConfig
	configured bool
	started    bool
	down       bool
	listenFD   int
	ip         net.IP
	gid        verbs.GID
	lid        uint16
	bucket     *bucket
	delay      int64 // fault hook: extra latency on every packet leaving
	// fault hook: drop a packet leaving with probability 1/dropEvery
	// (0: none), drawn from the xorshift state lossRNG
	dropEvery int
	lossRNG   uint64
}

func (p *port) attr() verbs.PortAttr {
	a := verbs.PortAttr{
		State: verbs.PortActive, MaxMTU: verbs.MTU4096, ActiveMTU: verbs.MTU4096,
		LID: p.lid, GID: p.gid, LinkLayer: verbs.LinkEthernet, Rate: p.cfg.Rate,
	}
	if p.down {
		a.State = verbs.PortDown
	}
	return a
}

// resolveAddr turns a port's configured address (IP, interface name or
// host name) into an IP; empty is loopback.
func resolveAddr(s string) (net.IP, error) { return netif.Resolve(s) }

func sockaddrOf(ip net.IP, port int) (unix.Sockaddr, int) {
	if v4 := ip.To4(); v4 != nil {
		sa := &unix.SockaddrInet4{Port: port}
		copy(sa.Addr[:], v4)
		return sa, unix.AF_INET
	}
	sa := &unix.SockaddrInet6{Port: port}
	copy(sa.Addr[:], ip.To16())
	return sa, unix.AF_INET6
}

// start opens the port's listener. Called with d.mu held. A port without
// the job's key to authenticate its links with does not start.
func (p *port) start() error {
	if p.d.cfg.Key == nil {
		return fmt.Errorf("softrc: %s port %d: %w (DeviceConfig.Key)", p.d.name, p.num, core.ErrNoJobKey)
	}
	ip, err := resolveAddr(p.cfg.Addr)
	if err != nil {
		return fmt.Errorf("softrc: %s port %d: %w", p.d.name, p.num, err)
	}
	sa, family := sockaddrOf(ip, 0)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("softrc: %s port %d: socket: %w", p.d.name, p.num, err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return fmt.Errorf("softrc: %s port %d: bind %s: %w", p.d.name, p.num, ip, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return fmt.Errorf("softrc: %s port %d: listen: %w", p.d.name, p.num, err)
	}
	name, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("softrc: %s port %d: getsockname: %w", p.d.name, p.num, err)
	}
	switch a := name.(type) {
	case *unix.SockaddrInet4:
		p.lid = uint16(a.Port)
	case *unix.SockaddrInet6:
		p.lid = uint16(a.Port)
	}
	if err := unix.EpollCtl(p.d.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("softrc: %s port %d: epoll_ctl: %w", p.d.name, p.num, err)
	}
	p.listenFD = fd
	p.ip = ip
	copy(p.gid[:], ip.To16())
	if p.cfg.Link != "" {
		b, err := openSharedBucket(p.cfg.Link, p.cfg.Rate)
		if err != nil {
			unix.EpollCtl(p.d.epfd, unix.EPOLL_CTL_DEL, fd, nil)
			unix.Close(fd)
			return fmt.Errorf("softrc: %s port %d: %w", p.d.name, p.num, err)
		}
		p.bucket = b
	} else {
		p.bucket = newBucket(p.cfg.Rate, nowNS())
	}
	if p.cfg.Delay > 0 {
		p.delay = int64(p.cfg.Delay)
	}
	p.started = true
	return nil
}

func (p *port) stopListening() {
	if p.listenFD >= 0 {
		unix.EpollCtl(p.d.epfd, unix.EPOLL_CTL_DEL, p.listenFD, nil)
		unix.Close(p.listenFD)
		p.listenFD = -1
	}
}

// accept takes every pending connection. Called with d.mu held.
func (p *port) accept(now int64) {
	for p.listenFD >= 0 {
		fd, _, err := unix.Accept4(p.listenFD, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		tuneSocket(fd)
		l, err := p.d.addLink(p, fd, false)
		if err != nil {
			unix.Close(fd)
			continue
		}
		p.d.admit(l, now)
		// The dialer's HELLO is usually there already.
		l.receive(now)
	}
}

// tuneSocket sets up a link's socket: no Nagle delay, and on a link
// between two processes of one host a congestion control that does not
// pace (netif.NoPacing).
func tuneSocket(fd int) {
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if netif.OnHost(fd) {
		netif.Unpace(fd)
	}
}

// gidIP is the IP a GID stands for.
func gidIP(g verbs.GID) net.IP {
	ip := net.IP(g[:])
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}

// dialTimeout bounds a connection attempt to a remote port.
const dialTimeout = 5 * time.Second

// dial connects to the port at (gid, lid). It blocks and is called without
// d.mu.
func dial(gid verbs.GID, lid uint16) (int, error) {
	sa, family := sockaddrOf(gidIP(gid), int(lid))
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	err = unix.Connect(fd, sa)
	if err == unix.EINPROGRESS {
		deadline := time.Now().Add(dialTimeout)
		for {
			ms := int(time.Until(deadline) / time.Millisecond)
			if ms <= 0 {
				unix.Close(fd)
				return -1, fmt.Errorf("connect: timed out after %v", dialTimeout)
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			n, perr := unix.Poll(pfd, ms)
			if perr == unix.EINTR {
				continue
			}
			if perr != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("connect: poll: %w", perr)
			}
			if n > 0 {
				break
			}
		}
		soerr, gerr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if gerr != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("connect: %w", gerr)
		}
		if soerr != 0 {
			err = unix.Errno(soerr)
		} else {
			err = nil
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect %s:%d: %w", gidIP(gid), lid, err)
	}
	tuneSocket(fd)
	return fd, nil
}

// linkTo returns a live link from p to (gid, lid), dialing one if there is
// none. Called with d.mu held; it drops and retakes the lock to dial.
func (p *port) linkTo(gid verbs.GID, lid uint16) (*link, error) {
	if l := p.findLink(gid, lid); l != nil {
		return l, nil
	}
	// The peer may have connected already: take pending connections and
	// their HELLOs first, so that the two directions share one TCP
	// connection (on which TCP's own ACKs ride with the data).
	p.d.pollEpoll(nowNS())
	if l := p.findLink(gid, lid); l != nil {
		return l, nil
	}
	if p.down {
		return nil, fmt.Errorf("softrc: %s port %d is down", p.d.name, p.num)
	}
	return p.dialLink(gid, lid)
}

// dialLink connects p to (gid, lid) and proves the job's key. Called with
// d.mu held, which it releases while it waits for the peer.
func (p *port) dialLink(gid verbs.GID, lid uint16) (*link, error) {
	d := p.d
	d.mu.Unlock()
	fd, err := dial(gid, lid)
	if err == nil {
		if err = p.handshake(fd, gid, lid); err != nil {
			unix.Close(fd)
			err = fmt.Errorf("connect %s:%d: %w", gidIP(gid), lid, err)
		}
	}
	d.mu.Lock()
	if err != nil {
		if errors.Is(err, errRejected) {
			d.rejected(err)
		}
		return nil, fmt.Errorf("softrc: %s port %d: %w", d.name, p.num, err)
	}
	if d.closed || p.down {
		unix.Close(fd)
		return nil, fmt.Errorf("softrc: %s port %d went away while connecting", d.name, p.num)
	}
	l, err := d.addLink(p, fd, true)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	l.peerGID, l.peerLID = gid, lid
	p.markSpares(gid, lid)
	return l, nil
}

// findLink returns a usable link from p to (gid, lid): the canonical one
// when the two ports dialed each other at once, so that both ends send on
// the same connection.
func (p *port) findLink(gid verbs.GID, lid uint16) *link {
	var first *link
	for _, l := range p.d.links {
		if l.port == p && l.usable() && l.peerLID == lid && l.peerGID == gid {
			if l.canonical() {
				return l
			}
			if first == nil {
				first = l
			}
		}
	}
	return first
}

// canonical says whether l is the connection two ports keep when each
// dialed the other at once (both had a packet for the other before either
// saw the other's connection — a barrier's first messages do it): the one
// the smaller address dialed. Both ends decide it alone and agree. With
// two connections each would carry one direction, every poll would read
// both, and TCP could not ride its ACKs on the data going back: every few
// messages a read would send a bare ACK, at the cost of a transmit and the
// peer's receive inside the reader's read.
func (l *link) canonical() bool {
	return l.dialed == addrLess(l.port.gid, l.port.lid, l.peerGID, l.peerLID)
}

func addrLess(g1 verbs.GID, l1 uint16, g2 verbs.GID, l2 uint16) bool {
	if c := bytes.Compare(g1[:], g2[:]); c != 0 {
		return c < 0
	}
	return l1 < l2
}

// markSpares marks the links from p to (gid, lid) that a poll need not
// read: those besides the canonical one that no QP of this device sends
// on. Polls leave a spare link to epoll (every acceptEvery-th poll, and
// the device goroutine), and an RC packet arriving on it makes it a link
// like any other again (the peer's QP chose it before the canonical link
// was there). A port's connection to itself has two ends, not two links,
// and nothing is spare. Called with d.mu held whenever a link to the peer
// is born or dies and when a QP picks its link.
func (p *port) markSpares(gid verbs.GID, lid uint16) {
	var keep *link
	for _, l := range p.d.links {
		if l.port == p && l.usable() && l.peerLID == lid && l.peerGID == gid && l.canonical() {
			keep = l
		}
	}
	self := gid == p.gid && lid == p.lid
	for _, l := range p.d.links {
		if l.port != p || l.peerLID != lid || l.peerGID != gid {
			continue
		}
		l.spare = keep != nil && l != keep && !self && !l.dead && !p.d.sendsOn(l)
	}
}

// sendsOn says whether a QP of d sends on l.
func (d *Device) sendsOn(l *link) bool {
	for _, q := range d.qps {
		if q.out == l {
			return true
		}
	}
	return false
}
