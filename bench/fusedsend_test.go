package bench

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// The fused send path (pml/fast.go, sendDirect) over sm: an eager Isend
// or Send writes its frame straight into the peer's fast box, and Isend's
// request is done when it returns; an Irecv whose message has arrived
// takes it at once. Both must keep MPI's order with the general path and
// give requests that behave like any other.

func fusedSends(c *pml.Comm) int64 { return c.Metrics().Counter("pml.fused_sends").Load() }

// warm sends one message each way and receives it: the first frame to a
// peer goes the general way (sm announces the sender then).
func warm(t *testing.T, c [2]*pml.Comm) {
	t.Helper()
	for i := range 2 {
		send(t, c[i], "warm", 1-i, 99)
		recvString(t, c[1-i], i, 99)
	}
}

func TestFusedIsendReturnsADoneRequestAndAllocatesNothing(t *testing.T) {
	c := twoRanks(t)
	warm(t, c)
	before := fusedSends(c[0])
	r, err := c[0].Isend([]byte("hello"), 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	if fusedSends(c[0]) != before+1 {
		t.Fatal("an eager Isend to an sm peer did not take the fused send path")
	}
	// The request behaves as any completed send: a Cancel does nothing
	// but say sends cannot be cancelled, Test reports it done with its
	// status and releases it, and a second Test finds it released.
	if err := c[0].Cancel(r); !errors.Is(err, core.ErrNotSupported) {
		t.Fatalf("Cancel of a send: %v, want ErrNotSupported", err)
	}
	ok, st, err := c[0].Test(r)
	if !ok || err != nil || st != (pml.Status{Source: 0, Tag: 7, Count: 5}) {
		t.Fatalf("Test = %v %+v %v, want done with source 0, tag 7, count 5", ok, st, err)
	}
	if _, _, err := c[0].Test(r); !errors.Is(err, pml.ErrInvalid) {
		t.Fatalf("Test of a released request: %v, want ErrInvalid", err)
	}
	if got := recvString(t, c[1], 0, 7); got != "hello" {
		t.Fatalf("got %q", got)
	}
	// Wait, Free and Waitall take it too.
	r, _ = c[0].Isend([]byte("a"), 1, 7)
	if st, err := c[0].Wait(r); err != nil || st.Count != 1 {
		t.Fatalf("Wait = %+v %v", st, err)
	}
	r, _ = c[0].Isend([]byte("b"), 1, 7)
	if err := c[0].Free(r); err != nil {
		t.Fatal(err)
	}
	rs := []*pml.Request{nil, nil}
	rs[0], _ = c[0].Isend([]byte("c"), 1, 7)
	rs[1], _ = c[0].Isend([]byte("dd"), 1, 8)
	sts := make([]pml.Status, 2)
	if err := c[0].Waitall(rs, sts); err != nil || rs[0] != nil || rs[1] != nil || sts[1] != (pml.Status{Tag: 8, Count: 2}) {
		t.Fatalf("Waitall = %v %v %+v", err, rs, sts)
	}
	for _, want := range []string{"a", "b", "c"} {
		if got := recvString(t, c[1], 0, 7); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	recvString(t, c[1], 0, 8)

	buf := make([]byte, 8)
	ss := make([]*pml.Request, 8)
	round := func() {
		for i := range ss {
			ss[i], _ = c[0].Isend(buf, 1, 2)
		}
		c[0].Waitall(ss, nil)
		for range ss {
			c[1].Recv(buf, 0, 2)
		}
	}
	takesPathAllocatingNothing(t, round, func() int64 { return fusedSends(c[0]) }, "the window's Isends")
}

// takesPathAllocatingNothing runs round until testing.AllocsPerRun has
// its average and fails the test if a round allocates or if count, a
// fused path's counter, never moved: what names the calls that should
// have taken it.
func takesPathAllocatingNothing(t *testing.T, round func(), count func() int64, what string) {
	t.Helper()
	round()
	before := count()
	if a := testing.AllocsPerRun(500, round); a != 0 {
		t.Fatalf("%v allocations a round", a)
	}
	if count() == before {
		t.Fatalf("%s never took the fused path", what)
	}
}

// Messages that go the general way — too long for the fast box, or
// meeting a full box — and messages on the fused path reach the receiver
// in the order they were sent.
func TestFusedSendKeepsOrderWithTheGeneralPath(t *testing.T) {
	c := twoRanks(t)
	warm(t, c)
	const n = 3000 // more 8-byte frames than the fast box holds
	var sent []int
	reqs := make([]*pml.Request, 0, n)
	before := fusedSends(c[0])
	for i := range n {
		var buf []byte
		if i%50 == 25 {
			buf = make([]byte, 2048) // through a fragment on the FIFO, not the box
		} else {
			buf = make([]byte, 8)
		}
		binary.LittleEndian.PutUint64(buf, uint64(i))
		r, err := c[0].Isend(buf, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
		sent = append(sent, i)
		if i%700 == 699 {
			// The receiver drains part of the way now and then, so the
			// box has room again and sends go back to the fused path.
			for range 400 {
				expectNext(t, c, &sent)
			}
		}
	}
	for len(sent) > 0 {
		expectNext(t, c, &sent)
	}
	if err := c[0].Waitall(reqs, nil); err != nil {
		t.Fatal(err)
	}
	if d := fusedSends(c[0]) - before; d == 0 || d == n {
		t.Fatalf("%d of %d sends took the fused path; the test needs both paths", d, n)
	}
}

// expectNext receives one message from rank 0 with tag 4 at rank 1 and
// checks that it is the first of sent, which it removes. Both ranks run
// in this goroutine, so it polls the sender too: frames that met a full
// FIFO wait in its queue for its progress.
func expectNext(t *testing.T, c [2]*pml.Comm, sent *[]int) {
	t.Helper()
	buf := make([]byte, 2048)
	r, err := c[1].Irecv(buf, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	for {
		done, st, err := c[1].Test(r)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			if got := int(binary.LittleEndian.Uint64(buf)); got != (*sent)[0] {
				t.Fatalf("received message %d (%d bytes), want %d", got, st.Count, (*sent)[0])
			}
			*sent = (*sent)[1:]
			return
		}
		c[0].Progress()
	}
}

// An Irecv whose message has arrived takes it at once, unless a receive
// posted earlier could take it first.
func TestFusedIrecvTakesAnArrivedMessage(t *testing.T) {
	c := twoRanks(t)
	warm(t, c)
	send(t, c[0], "here", 1, 3)
	before := fused(c[1])
	buf := make([]byte, 8)
	r, err := c[1].Irecv(buf, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if fused(c[1]) != before+1 {
		t.Fatal("an Irecv of an arrived in-order eager message did not take it at once")
	}
	if st, err := c[1].Wait(r); err != nil || string(buf[:st.Count]) != "here" || st.Source != 0 || st.Tag != 3 {
		t.Fatalf("Wait = %+v %v, buffer %q", st, err, buf)
	}

	// A wildcard receive posted first takes the first message.
	first := make([]byte, 8)
	any, _ := c[1].Irecv(first, pml.AnySource, 3)
	send(t, c[0], "one", 1, 3)
	send(t, c[0], "two", 1, 3)
	r, _ = c[1].Irecv(buf, 0, 3)
	st2, err := c[1].Wait(r)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := c[1].Wait(any)
	if err != nil {
		t.Fatal(err)
	}
	if string(first[:st1.Count]) != "one" || string(buf[:st2.Count]) != "two" {
		t.Fatalf("the earlier wildcard got %q and the later Irecv %q; want one, two", first[:st1.Count], buf[:st2.Count])
	}

	// A message too long for the buffer is left to the general path,
	// which truncates it.
	send(t, c[0], "far too long", 1, 3)
	r, _ = c[1].Irecv(buf, 0, 3)
	if _, err := c[1].Wait(r); !errors.Is(err, core.ErrTruncated) {
		t.Fatalf("Wait = %v, want ErrTruncated", err)
	}

	rs := make([]*pml.Request, 8)
	round := func() {
		for range rs {
			c[0].Send(buf, 1, 2)
		}
		for i := range rs {
			rs[i], _ = c[1].Irecv(buf, 0, 2)
		}
		c[1].Waitall(rs, nil)
	}
	takesPathAllocatingNothing(t, round, func() int64 { return fused(c[1]) }, "Irecvs of arrived messages")
}

// Eager Isends that leave at once share one done request while their
// status (tag, count) is the same; another status while handles are out
// gets a request of its own; the shared request takes a new status once
// every handle is released, is never recycled into another request, and
// a handle used again once none is out is reported as released.
func TestFusedIsendsShareOneDoneRequest(t *testing.T) {
	c := twoRanks(t)
	warm(t, c)
	isend := func(s string, tag int) *pml.Request {
		t.Helper()
		r, err := c[0].Isend([]byte(s), 1, tag)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := isend("aa", 4), isend("bb", 4)
	if a != b {
		t.Fatal("two eager Isends of one tag and count returned two requests")
	}
	other, longer := isend("cc", 5), isend("ddd", 4)
	if other == a || longer == a || other == longer {
		t.Fatal("an Isend of another tag or count returned the shared request while it was held")
	}
	rs := []*pml.Request{a, b, other, longer}
	sts := make([]pml.Status, len(rs))
	if err := c[0].Waitall(rs, sts); err != nil {
		t.Fatal(err)
	}
	want := []pml.Status{{Tag: 4, Count: 2}, {Tag: 4, Count: 2}, {Tag: 5, Count: 2}, {Tag: 4, Count: 3}}
	for i := range want {
		if sts[i] != want[i] {
			t.Fatalf("status %d = %+v, want %+v", i, sts[i], want[i])
		}
	}
	if _, _, err := c[0].Test(a); !errors.Is(err, pml.ErrInvalid) {
		t.Fatalf("Test of the shared request with no handle out: %v, want ErrInvalid", err)
	}
	// Released by all, it takes the next status.
	if r := isend("eeeee", 6); r != a {
		t.Fatal("the shared request was not handed out again once released")
	} else if st, err := c[0].Wait(r); err != nil || st != (pml.Status{Tag: 6, Count: 5}) {
		t.Fatalf("Wait = %+v %v, want tag 6, count 5", st, err)
	}
	// It was not recycled: a receive takes a request of its own.
	rr, err := c[0].Irecv(make([]byte, 8), 1, 9)
	if err != nil {
		t.Fatal(err)
	}
	if rr == a {
		t.Fatal("the shared send was recycled into a receive")
	}
	c[1].Send([]byte("x"), 0, 9)
	if _, err := c[0].Wait(rr); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		s   string
		tag int
	}{{"aa", 4}, {"bb", 4}, {"cc", 5}, {"ddd", 4}, {"eeeee", 6}} {
		if got := recvString(t, c[1], 0, w.tag); got != w.s {
			t.Fatalf("got %q, want %q", got, w.s)
		}
	}
}
