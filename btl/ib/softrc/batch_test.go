package softrc

import (
	"testing"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// A window of sends posted in a row leaves the host in a few writes: the
// first at once, the rest with the next poll (qp.PostSend), in order.
// Its subject is the process's batching, so the process first takes the
// wire back from the device goroutine (which holds it after the connect,
// when nobody polled) by spinning; a window during which the device
// goroutine still woke (the process descheduled or slowed by the race
// detector; CI saw 4 writes that way) does not judge it, and the test tries
// a fresh pair, up to five times.
func TestSendsPostedInARowShareAWrite(t *testing.T) {
	for range 5 {
		if judged := sendWindow(t); judged {
			return
		}
	}
	t.Skip("the device goroutine took the wire in every window: the host is too slow to judge the batching")
}

func sendWindow(t *testing.T) (judged bool) {
	const window = 64
	x, y := newEnd(t, endOpts{}), newEnd(t, endOpts{})
	connect(t, x, y, defaultRC())
	sizes := make([]int, window)
	for i := range sizes {
		sizes[i] = 8
	}
	dst := y.recvs(sizes...)
	src := x.reg(8*window, allAccess)
	for i := range window {
		copy(src.Bytes()[8*i:], []byte{byte(i), 1, 2, 3, 4, 5, 6, 7})
	}
	// Polls before the window, as a process's last Wait: spinning, they
	// take the wire from the device goroutine.
	for range 1000 {
		x.poll()
		if !x.engaged() {
			break
		}
	}
	before := x.dev.Stats()
	for i := range window {
		x.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(src, 8*i, 8)})
	}
	pollUntil(t, "the window delivered", func() bool { return y.count(verbs.WCRecv) == window }, x, y)
	after := x.dev.Stats()
	for i := range window {
		if got := dst.Bytes()[8*i]; got != byte(i) {
			t.Fatalf("receive %d holds message %d: out of order", i, got)
		}
	}
	if after.NICEngagements != before.NICEngagements || after.NICWakeups != before.NICWakeups {
		t.Logf("the device goroutine took the wire during the window (%d writes): not judged", after.Writes-before.Writes)
		return false
	}
	if n := after.Writes - before.Writes; n > 3 {
		t.Errorf("%d writes for %d sends posted in a row (%d batched), want at most 3", n, window, after.SendsBatched-before.SendsBatched)
	}
	return true
}

// A send left for the next poll still goes when the process stops
// polling: the device goroutine writes it once the process has been idle
// for IdleAfter.
func TestABatchedSendGoesWithoutAPoll(t *testing.T) {
	x, y := newEnd(t, endOpts{}), newEnd(t, endOpts{})
	connect(t, x, y, defaultRC())
	y.recvs(8, 8)
	src := x.reg(16, allAccess)
	x.poll()
	x.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpSend, SG: sge(src, 0, 8)})
	x.post(verbs.SendWR{WRID: 2, Opcode: verbs.OpSend, SG: sge(src, 8, 8)})
	if x.dev.Stats().SendsBatched == 0 {
		t.Fatal("the second send went at once: nothing to test")
	}
	// Only the receiver polls.
	pollUntil(t, "both sends delivered", func() bool { return y.count(verbs.WCRecv) == 2 }, y)
}

// engaged reports whether the end's device goroutine holds the wire.
func (e *end) engaged() bool {
	e.dev.mu.Lock()
	defer e.dev.mu.Unlock()
	return e.dev.nicEngaged
}
