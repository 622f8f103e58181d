package sm

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gobtl/gobtl/core"
	"golang.org/x/sys/unix"
)

// The notifier (core.Notifier) lets a progress goroutine sleep until a
// solicited event (seed 004 §4.3), the shared-memory analogue of
// ibv_req_notify_cq(solicited_only) and ibv_get_cq_event. Two words in the
// owner's segment carry it:
//
//	armed  1 while a notification is wanted (Arm sets it, the first event
//	       clears it: one notification per Arm, further events suppressed)
//	seq    a futex word bumped by each notification
//
// A sender that publishes a solicited frame, and sees armed, clears it with
// a CAS, bumps seq and wakes the futex; the owner's waiter goroutine, parked
// in FUTEX_WAIT on seq, turns the wake-up into a channel send. Frames that
// are not solicited cost the sender nothing. Because the sender publishes
// before it reads armed and Arm stores armed before it looks for pending
// frames (all sequentially consistent atomics), an event is never missed.
const (
	offArmed = 5 * cacheLine
	offSeq   = 5*cacheLine + 4
)

const (
	futexWait = 0 // FUTEX_WAIT, shared: the word is in a MAP_SHARED file
	futexWake = 1
)

func futex(addr *uint32, op, val uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), uintptr(op), uintptr(val), 0, 0, 0)
}

// notifier is a module's notification state.
type notifier struct {
	once    sync.Once
	ch      chan struct{}
	stop    atomic.Bool
	stopped chan struct{}
}

var _ core.Notifier = (*Module)(nil)

// Notify is the channel notifications arrive on.
func (m *Module) Notify() <-chan struct{} {
	n := &m.note
	if m.closed {
		return n.ch // nil if it never ran: no notification will come
	}
	n.once.Do(func() {
		n.ch = make(chan struct{}, 1)
		n.stopped = make(chan struct{})
		// Read seq now, not in the goroutine: a wake-up between here and
		// its first instruction must count.
		go m.waitNotifications(atomic.LoadUint32(m.seg.u32(offSeq)))
	})
	return n.ch
}

// Arm requests one notification at the next solicited event, at once if
// one is pending.
func (m *Module) Arm() {
	if m.closed {
		return
	}
	atomic.StoreUint32(m.seg.u32(offArmed), 1)
	if m.pending() {
		m.notifySelf()
	}
}

// pending reports whether anything waits to be delivered or completed. It
// does not tell solicited frames from others: a spurious notification
// costs one drain, a missed one a hang.
func (m *Module) pending() bool {
	if len(m.rdma.done)+len(m.coop.gets)+len(m.coop.helps) > 0 {
		return true // a read from both ends moves only inside Progress
	}
	if _, ok := m.rx.fifo.peek(); ok {
		return true
	}
	for s := range m.rx.in {
		if m.rx.rxDead[s] {
			continue
		}
		in := &m.rx.in[s]
		if atomic.LoadUint64((*uint64)(unsafe.Pointer(&in.ring[in.head&in.mask]))) != 0 {
			return true
		}
	}
	return false
}

// notifySelf delivers a notification for an event of this process (a
// solicited RDMA completion, or one found pending by Arm).
func (m *Module) notifySelf() { wake(m.seg) }

// wake notifies the owner of seg if it is armed.
func wake(seg *segment) {
	armed := seg.u32(offArmed)
	if atomic.LoadUint32(armed) == 0 || !atomic.CompareAndSwapUint32(armed, 1, 0) {
		return
	}
	seq := seg.u32(offSeq)
	atomic.AddUint32(seq, 1)
	futex(seq, futexWake, 1)
}

// waitNotifications turns futex wake-ups into channel sends until Close.
func (m *Module) waitNotifications(seen uint32) {
	n := &m.note
	defer close(n.stopped)
	seq := m.seg.u32(offSeq)
	for !n.stop.Load() {
		cur := atomic.LoadUint32(seq)
		if cur == seen {
			futex(seq, futexWait, cur) // returns at once if seq moved on
			continue
		}
		seen = cur
		if n.stop.Load() {
			return
		}
		select {
		case n.ch <- struct{}{}:
		default: // one pending notification is as good as two
		}
	}
}

// stopNotifications ends the waiter before the segment is unmapped.
func (m *Module) stopNotifications() {
	n := &m.note
	if n.ch == nil {
		return
	}
	n.stop.Store(true)
	seq := m.seg.u32(offSeq)
	atomic.AddUint32(seq, 1)
	futex(seq, futexWake, 1)
	<-n.stopped
}
