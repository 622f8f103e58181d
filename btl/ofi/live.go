//go:build ofi && cgo

package ofi

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
)

// Liveness. libfabric says nothing when a peer's process dies: a reliable
// datagram endpoint has no connection to see go down, and a provider
// reports a dead peer only when an operation to it fails (tcp and
// sockets do, on the next send; shm never does, its peer's memory stays
// mapped). So the module watches its peers itself, by where they run —
// which the bootstrap's record says (process id, and a host identity of
// boot id, host name and pid namespace):
//
//   - a peer in another process on this host: a pidfd, polled at
//     housekeeping (as btl/sm does);
//   - a peer in this process (tests run a job's ranks as goroutines): the
//     process-wide table of open modules, which Kill and Close mark;
//   - a peer on another host: when it has been silent for probe_interval,
//     a probe message on the session; a provider that cannot deliver it
//     fails it, and the peer is lost. tcp under ofi_rxm does not fail it:
//     once it has seen the connection go, it answers every send to the
//     peer with -FI_EAGAIN, for good. So a peer to which nothing of ours
//     is in flight and whose every probe (or hello) the provider has
//     refused for peer_timeout is lost too. Silence alone never loses a
//     peer: a rank may compute for minutes without calling in.
//
// A peer that said goodbye (Close) is closed, not lost.

// procState is a module's state as its peers in this process see it.
type procState struct{ v atomic.Int32 }

const (
	procAlive int32 = iota
	procDead
	procClosed
)

var registry = struct {
	sync.Mutex
	byName map[string]*procState
}{byName: map[string]*procState{}}

func register(name []byte, s *procState) {
	registry.Lock()
	registry.byName[string(name)] = s
	registry.Unlock()
}

// unregister marks s closed (released) or dead (killed) for its peers.
func unregister(name []byte, s *procState, released bool) {
	if released {
		s.v.Store(procClosed)
	} else {
		s.v.Store(procDead)
	}
	registry.Lock()
	if registry.byName[string(name)] == s {
		delete(registry.byName, string(name))
	}
	registry.Unlock()
}

func lookup(name []byte) *procState {
	registry.Lock()
	defer registry.Unlock()
	return registry.byName[string(name)]
}

// liveness is a module's watch on its peers.
type liveness struct {
	host   [16]byte
	self   procState
	fds    []unix.PollFd
	byFd   []*peer
	local  []*peer // in this process
	remote []*peer // on other hosts
}

func (l *liveness) init() error {
	l.host = hostID()
	return nil
}

// hostID names this host and pid namespace: two processes with the same
// one can watch each other's pids.
func hostID() [16]byte {
	h := sha256.New()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	h.Write(boot)
	name, _ := os.Hostname()
	h.Write([]byte(name))
	if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		h.Write([]byte(ns))
	}
	var id [16]byte
	copy(id[:], h.Sum(nil))
	return id
}

// watch starts watching a new peer.
func (l *liveness) watch(p *peer, now time.Duration) {
	switch {
	case p.pub.host != l.host:
		p.remote = true
		l.remote = append(l.remote, p)
	case p.pub.pid == os.Getpid():
		p.proc = lookup(p.pub.name)
		l.local = append(l.local, p)
	default:
		fd, err := unix.PidfdOpen(p.pub.pid, 0)
		switch {
		case err == nil:
			p.pidfd = fd
			l.fds = append(l.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			l.byFd = append(l.byFd, p)
		case errors.Is(err, unix.ESRCH):
			p.lose(fmt.Errorf("its process %d is gone", p.pub.pid))
		default:
			// Without pidfds (old kernels) a local peer's death is noticed
			// only when a send to it fails.
			p.remote = true
			l.remote = append(l.remote, p)
		}
	}
}

// forget stops watching p (lost or closed).
func (l *liveness) forget(p *peer) {
	if p.pidfd >= 0 {
		for i := range l.byFd {
			if l.byFd[i] == p {
				l.fds = append(l.fds[:i], l.fds[i+1:]...)
				l.byFd = append(l.byFd[:i], l.byFd[i+1:]...)
				break
			}
		}
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
}

// procGone reports a peer in this process that is known gone.
func (p *peer) procGone() bool { return p.proc != nil && p.proc.v.Load() != procAlive }

// check runs at housekeeping.
func (l *liveness) check(m *Module, now time.Duration) {
	for _, p := range l.local {
		if p.err != nil || p.proc == nil {
			continue
		}
		switch p.proc.v.Load() {
		case procDead:
			p.lose(errors.New("its module died"))
		case procClosed:
			p.closed()
		}
	}
	if len(l.fds) > 0 {
		if n, err := unix.Poll(l.fds, 0); err == nil && n > 0 {
			for i := len(l.fds) - 1; i >= 0; i-- {
				if l.fds[i].Revents != 0 {
					l.byFd[i].lose(fmt.Errorf("its process %d exited", l.byFd[i].pub.pid))
				}
			}
		}
	}
	probe := time.Duration(m.cfg.probe)
	for _, p := range l.remote {
		if p.err != nil || (p.tx == txIdle && p.rxTok == 0) || now-p.heard < probe || now-p.probed < probe {
			continue
		}
		p.probed = now
		p.sendProbe()
	}
}

// sendProbe sends a probe on p's session (starting it if need be); the
// provider's failure to deliver it loses the peer (cqError).
func (p *peer) sendProbe() {
	switch p.tx {
	case txIdle:
		p.dial()
	case txUp:
		var b [ctlHdr]byte
		putCtl(b[:], opProbe, p.m.rank)
		err := p.m.sendCtlTracked(p, b[:], cqData(p.txTok, 0))
		if p.ctlErr("probe", err) {
			p.refusedAt = 0
		} else if errors.Is(err, fabric.ErrAgain) {
			p.stuck()
		}
	}
}

// stuck notes a probe or hello the provider refused for now; refused for
// peer_timeout with nothing else of ours in flight to the peer, the peer
// is lost (see above: tcp's way of saying it is gone).
func (p *peer) stuck() {
	now := p.m.now
	switch {
	case p.refusedAt == 0:
		p.refusedAt = now + 1
	case p.inflight == 0 && now+1-p.refusedAt >= time.Duration(p.m.cfg.peerTimeout):
		p.lose(fmt.Errorf("the provider has refused every message to it for %v", time.Duration(p.m.cfg.peerTimeout)))
	}
}

func (l *liveness) close() {
	for _, p := range l.byFd {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	l.fds, l.byFd = nil, nil
}
