//go:build ofi && cgo

package ofi

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
)

// The notifier: core.Notifier over the CQ's wait fd (FI_WAIT_FD), for
// the event-driven rendezvous (rdma_read_async, seed 004 §4.3). Arm asks
// fi_trywait whether the CQ may be waited on: if completions are pending
// it notifies at once, else a goroutine of the module's own polls the fd
// and notifies once when it becomes readable — one notification per Arm,
// the interrupt suppression of ibv_req_notify_cq. The goroutine only
// polls file descriptors; it never calls libfabric, so the module's
// calls stay serialized by its caller.
//
// libfabric has no solicited events: the fd wakes on any completion, or
// (tcp, whose progress is manual) on any bytes for the endpoint. An armed
// waiter may wake for an unsolicited frame: early, never late.
type notifier struct {
	ep      *fabric.Endpoint
	fd      int
	stop    int // eventfd that ends the goroutine
	ch      chan struct{}
	arms    chan struct{}
	done    chan struct{}
	polling atomic.Bool
	wg      sync.WaitGroup
}

func newNotifier(ep *fabric.Endpoint) (*notifier, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	n := &notifier{ep: ep, fd: ep.WaitFD(), stop: efd, ch: make(chan struct{}, 1), arms: make(chan struct{}, 1),
		done: make(chan struct{})}
	n.wg.Add(1)
	go n.run()
	return n, nil
}

// arm requests one notification.
func (n *notifier) arm() {
	if n.polling.Load() {
		return
	}
	if n.ep.TryWait() != nil {
		n.notify()
		return
	}
	n.polling.Store(true)
	select {
	case n.arms <- struct{}{}:
	default:
	}
}

func (n *notifier) notify() {
	select {
	case n.ch <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer n.wg.Done()
	fds := []unix.PollFd{{Fd: int32(n.fd), Events: unix.POLLIN}, {Fd: int32(n.stop), Events: unix.POLLIN}}
	for {
		select {
		case <-n.arms:
		case <-n.done:
			return
		}
		if !n.wait(fds) {
			return
		}
		n.polling.Store(false)
		n.notify()
	}
}

// wait blocks until the CQ's fd is readable (true) or the notifier stops.
func (n *notifier) wait(fds []unix.PollFd) bool {
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		_, err := unix.Poll(fds, -1)
		if err != nil && err != unix.EINTR {
			return false
		}
		if fds[1].Revents != 0 {
			return false
		}
		if fds[0].Revents != 0 {
			return true
		}
	}
}

// close stops the goroutine before the fd goes away.
func (n *notifier) close() {
	close(n.done)
	var one [8]byte
	one[0] = 1
	unix.Write(n.stop, one[:])
	n.wg.Wait()
	unix.Close(n.stop)
}
