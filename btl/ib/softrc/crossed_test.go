package softrc

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// crossed is two ends whose ports dialed each other at once, as two ranks
// do when both have a first packet for the other (a barrier): each device
// holds the connection it dialed and the one it accepted.
func crossed(t testing.TB) (x, y *end) {
	t.Helper()
	x, y = newEnd(t, endOpts{}), newEnd(t, endOpts{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, e := range []*end{x, y} {
		peer := []*end{y, x}[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.dev.mu.Lock()
			defer e.dev.mu.Unlock()
			_, errs[i] = e.dev.ports[0].dialLink(peer.port.GID, peer.port.LID)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	usable := func(e *end) int {
		e.dev.mu.Lock()
		defer e.dev.mu.Unlock()
		n := 0
		for _, l := range e.dev.links {
			if l.usable() {
				n++
			}
		}
		return n
	}
	pollUntil(t, "both accepted links authenticated", func() bool { return usable(x) == 2 && usable(y) == 2 }, x, y)
	return x, y
}

// sockAddrs returns the local and remote address of a link's socket.
func sockAddrs(t *testing.T, l *link) (string, string) {
	t.Helper()
	la, err := unix.Getsockname(l.fd)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := unix.Getpeername(l.fd)
	if err != nil {
		t.Fatal(err)
	}
	s := func(a unix.Sockaddr) string {
		switch a := a.(type) {
		case *unix.SockaddrInet4:
			return string(a.Addr[:]) + string(rune(a.Port))
		case *unix.SockaddrInet6:
			return string(a.Addr[:]) + string(rune(a.Port))
		}
		return "?"
	}
	return s(la), s(ra)
}

// TestCrossedDialsShareOneConnection: when two ports dialed each other at
// once, both QPs send on the same connection (the one the smaller address
// dialed), so TCP's ACKs ride on the data going back; and a poll reads
// only that connection, not the spare one.
func TestCrossedDialsShareOneConnection(t *testing.T) {
	x, y := crossed(t)
	connect(t, x, y, defaultRC())
	xo, yo := x.qp.(*qp).out, y.qp.(*qp).out
	xl, xr := sockAddrs(t, xo)
	yl, yr := sockAddrs(t, yo)
	if xl != yr || xr != yl {
		t.Fatalf("the QPs send on two connections (x dialed its own: %v, y: %v)", xo.dialed, yo.dialed)
	}

	// Messages both ways still arrive.
	const n = 20
	xm, ym := x.recvs(repeat(8, n)...), y.recvs(repeat(8, n)...)
	for i := 0; i < n; i++ {
		x.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpSend, SG: sge(xm, 0, 8)})
		y.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpSend, SG: sge(ym, 0, 8)})
	}
	pollUntil(t, "messages both ways", func() bool { return x.count(verbs.WCRecv) == n && y.count(verbs.WCRecv) == n }, x, y)

	for _, e := range []*end{x, y} {
		var wc [16]verbs.WC
		for range 100 {
			e.cq.Poll(wc[:]) // take the wire from the device goroutine
		}
		s0 := e.dev.Stats()
		const polls = 640
		for range polls {
			e.cq.Poll(wc[:])
		}
		s1 := e.dev.Stats()
		// Every acceptEvery-th poll asks epoll instead of reading.
		if reads := s1.Reads + s1.EmptyReads - s0.Reads - s0.EmptyReads; reads > polls {
			t.Errorf("%s: %d reads in %d idle polls: the spare connection is read too", e.dev.name, reads, polls)
		}
	}
}

// TestSpareLinkReadOnceUsed: a peer QP that chose the other connection
// (its link was there before the canonical one) is heard: its first packet
// comes through epoll and makes the link one that polls read.
func TestSpareLinkReadOnceUsed(t *testing.T) {
	x, y := crossed(t)
	connect(t, x, y, defaultRC())
	// y's QP sends on the connection the larger address dialed, as if it
	// had been connected before the other was accepted.
	yq := y.qp.(*qp)
	y.dev.mu.Lock()
	var other *link
	for _, l := range y.dev.links {
		if l.usable() && l != yq.out {
			other = l
		}
	}
	yq.out = other
	y.dev.mu.Unlock()
	x.dev.mu.Lock()
	var spare *link
	for _, l := range x.dev.links {
		if l.spare {
			spare = l
		}
	}
	x.dev.mu.Unlock()
	if spare == nil {
		t.Fatal("x marked no link spare")
	}

	const n = 10
	xm, ym := x.recvs(repeat(8, n)...), y.reg(8, allAccess)
	_ = xm
	for i := 0; i < n; i++ {
		y.post(verbs.SendWR{WRID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SG: sge(ym, 0, 8)})
	}
	pollUntil(t, "messages on the spare link", func() bool { return x.count(verbs.WCRecv) == n && y.count(verbs.WCSend) == n }, x, y)
	x.dev.mu.Lock()
	still := spare.spare
	x.dev.mu.Unlock()
	if still {
		t.Fatal("a link the peer sends on is still spare")
	}
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// BenchmarkPingPongCrossed is BenchmarkPingPong between two ports that
// dialed each other at once.
func BenchmarkPingPongCrossed(b *testing.B) {
	x, y := crossed(b)
	connect(b, x, y, defaultRC())
	run(b, x, y, 8)
}

// BenchmarkIdlePollCrossed is BenchmarkIdlePoll between two ports that
// dialed each other at once: reads/op says how many connections a poll
// reads.
func BenchmarkIdlePollCrossed(b *testing.B) {
	x, y := crossed(b)
	connect(b, x, y, defaultRC())
	idlePoll(b, y)
}
