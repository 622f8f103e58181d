package softrc

import (
	"testing"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// A window of sends posted in a row leaves the host in a few writes: the
// first at once, the rest with the next poll (qp.PostSend), in order.
func TestSendsPostedInARowShareAWrite(t *testing.T) {
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
	x.poll() // a poll before the window, as a process's last Wait
	before := x.dev.Stats()
	for i := range window {
		x.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(src, 8*i, 8)})
	}
	pollUntil(t, "the window delivered", func() bool { return y.count(verbs.WCRecv) == window }, x, y)
	after := x.dev.Stats()
	if n := after.Writes - before.Writes; n > 3 {
		t.Errorf("%d writes for %d sends posted in a row (%d batched), want at most 3", n, window, after.SendsBatched-before.SendsBatched)
	}
	for i := range window {
		if got := dst.Bytes()[8*i]; got != byte(i) {
			t.Fatalf("receive %d holds message %d: out of order", i, got)
		}
	}
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
