package bench

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// The fused receive path (pml/fast.go) over sm: it must be taken for a
// plain in-order eager message, and must step aside whenever MPI's order
// says another receive or another message comes first.

func fused(c *pml.Comm) int64 { return c.Metrics().Counter("pml.fused_recvs").Load() }

func recvString(t *testing.T, c *pml.Comm, src, tag int) string {
	t.Helper()
	buf := make([]byte, 64)
	st, err := c.Recv(buf, src, tag)
	if err != nil {
		t.Fatalf("recv from %d tag %d: %v", src, tag, err)
	}
	return string(buf[:st.Count])
}

func send(t *testing.T, c *pml.Comm, s string, dest, tag int) {
	t.Helper()
	if err := c.Send([]byte(s), dest, tag); err != nil {
		t.Fatalf("send %q: %v", s, err)
	}
}

func TestFusedRecvTakesAPlainEagerMessageAndAllocatesNothing(t *testing.T) {
	c := twoRanks(t)
	send(t, c[0], "hello", 1, 3)
	before := fused(c[1])
	if got := recvString(t, c[1], 0, 3); got != "hello" {
		t.Fatalf("got %q", got)
	}
	if fused(c[1]) != before+1 {
		t.Fatal("a blocking Recv of an in-order eager message did not take the fused path")
	}
	buf := make([]byte, 8)
	rounds := 0
	round := func() {
		c[0].Send(buf, 1, 1)
		c[1].Recv(buf, 0, 1)
		c[1].Send(buf, 0, 1) // received with AnyTag
		c[0].Recv(buf, 1, pml.AnyTag)
		rounds++
	}
	round()
	b0, b1 := fused(c[0]), fused(c[1])
	rounds = 0
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("%v allocations a round", a)
	}
	if d0, d1 := fused(c[0])-b0, fused(c[1])-b1; d0 != int64(rounds) || d1 != int64(rounds) {
		t.Fatalf("fused receives %d and %d in %d rounds", d0, d1, rounds)
	}
}

func TestFusedWaitOnAPostedReceiveAllocatesNothing(t *testing.T) {
	c := twoRanks(t)
	buf := make([]byte, 8)
	round := func() {
		r, _ := c[1].Irecv(buf, 0, 1)
		c[0].Send(buf, 1, 1)
		c[1].Wait(r)
	}
	takesPathAllocatingNothing(t, round, func() int64 { return fused(c[1]) }, "Wait on a posted receive")
}

// A receive posted earlier with the same tag takes the first message,
// whether both messages wait in the box when the blocking Recv starts or
// arrive while it runs.
func TestFusedRecvDoesNotOvertakeAnEarlierIrecv(t *testing.T) {
	c := twoRanks(t)
	for _, concurrent := range []bool{false, true} {
		first := make([]byte, 8)
		r, err := c[1].Irecv(first, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		sends := func() {
			c[0].Send([]byte("one"), 1, 5)
			c[0].Send([]byte("two"), 1, 5)
		}
		if concurrent {
			wg.Go(sends)
		} else {
			sends()
		}
		got := recvString(t, c[1], 0, 5)
		wg.Wait()
		st, err := c[1].Wait(r)
		if err != nil {
			t.Fatal(err)
		}
		if got != "two" || string(first[:st.Count]) != "one" {
			t.Fatalf("concurrent %v: Irecv got %q and the later Recv %q; want one, two", concurrent, first[:st.Count], got)
		}
	}
}

// A message kept as unexpected comes before one still in the fast box.
func TestFusedRecvTakesTheUnexpectedMessageFirst(t *testing.T) {
	c := twoRanks(t)
	send(t, c[0], "one", 1, 5)
	if ok, _, err := c[1].Iprobe(0, 5); !ok || err != nil { // polls: "one" is now unexpected
		t.Fatalf("probe: %v %v", ok, err)
	}
	send(t, c[0], "two", 1, 5)
	before := fused(c[1])
	if got := recvString(t, c[1], 0, 5); got != "one" {
		t.Fatalf("first Recv got %q, want the unexpected one", got)
	}
	if fused(c[1]) != before {
		t.Fatal("the unexpected message was taken by the fused path")
	}
	if got := recvString(t, c[1], 0, 5); got != "two" {
		t.Fatalf("second Recv got %q", got)
	}
}

// A message of another tag at the head of the box is left for the
// general path, and received later in its turn.
func TestFusedRecvStepsAsideForAnotherTag(t *testing.T) {
	c := twoRanks(t)
	send(t, c[0], "seven", 1, 7)
	send(t, c[0], "five", 1, 5)
	if got := recvString(t, c[1], 0, 5); got != "five" {
		t.Fatalf("Recv tag 5 got %q", got)
	}
	if got := recvString(t, c[1], 0, 7); got != "seven" {
		t.Fatalf("Recv tag 7 got %q", got)
	}
}

// A rendezvous message before an eager one of the same tag is received
// first, whole.
func TestFusedRecvKeepsARendezvousMessageInOrder(t *testing.T) {
	c := twoRanks(t)
	big := make([]byte, 256<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	var wg sync.WaitGroup
	var sendErr error
	wg.Go(func() {
		if sendErr = c[0].Send(big, 1, 5); sendErr == nil {
			sendErr = c[0].Send([]byte("small"), 1, 5)
		}
	})
	got := make([]byte, len(big))
	st, err := c[1].Recv(got, 0, 5)
	if err != nil || st.Count != len(big) || !bytes.Equal(got, big) {
		t.Fatalf("first Recv: %v, %d bytes, equal %v", err, st.Count, bytes.Equal(got, big))
	}
	if s := recvString(t, c[1], 0, 5); s != "small" {
		t.Fatalf("second Recv got %q", s)
	}
	wg.Wait()
	if sendErr != nil {
		t.Fatal(sendErr)
	}
}

// Waiting on a later receive delivers to the earlier one first: the
// first message goes to the first posted receive that matches it.
func TestFusedWaitKeepsPostedOrder(t *testing.T) {
	c := twoRanks(t)
	a, b := make([]byte, 8), make([]byte, 8)
	ra, _ := c[1].Irecv(a, 0, pml.AnyTag)
	rb, _ := c[1].Irecv(b, 0, 5)
	send(t, c[0], "one", 1, 5)
	send(t, c[0], "two", 1, 5)
	stb, err := c[1].Wait(rb)
	if err != nil {
		t.Fatal(err)
	}
	sta, err := c[1].Wait(ra)
	if err != nil {
		t.Fatal(err)
	}
	if string(a[:sta.Count]) != "one" || string(b[:stb.Count]) != "two" {
		t.Fatalf("AnyTag receive got %q, tag-5 receive %q; want one, two", a[:sta.Count], b[:stb.Count])
	}
}

// A message too long for the buffer is left to the general path, which
// reports the truncation.
func TestFusedRecvLeavesTruncationToTheGeneralPath(t *testing.T) {
	c := twoRanks(t)
	send(t, c[0], "longer than four", 1, 5)
	buf := make([]byte, 4)
	st, err := c[1].Recv(buf, 0, 5)
	if !errors.Is(err, core.ErrTruncated) || st.Count != 4 || string(buf) != "long" {
		t.Fatalf("got %v, %d bytes %q", err, st.Count, buf)
	}
}

// A Wait offers each frame to the first receive posted for its source;
// a frame of another tag goes to the first later receive that matches
// it, and a wildcard source posted first takes what it matches first.
func TestFusedWaitGivesEachFrameToTheFirstReceiveThatMatchesIt(t *testing.T) {
	c := twoRanks(t)
	bufs := make([][]byte, 3)
	for i := range bufs {
		bufs[i] = make([]byte, 8)
	}
	send(t, c[0], "warm", 1, 9) // the first frame to a peer takes the general path
	if got := recvString(t, c[1], 0, 9); got != "warm" {
		t.Fatalf("tag 9 got %q", got)
	}
	any5, _ := c[1].Irecv(bufs[0], pml.AnySource, 5)
	from7, _ := c[1].Irecv(bufs[1], 0, 7)
	from5, _ := c[1].Irecv(bufs[2], 0, 5)
	send(t, c[0], "a", 1, 5)
	send(t, c[0], "b", 1, 5)
	send(t, c[0], "c", 1, 7)
	before := fused(c[1])
	want := []struct {
		r    *pml.Request
		buf  []byte
		body string
	}{{from5, bufs[2], "b"}, {from7, bufs[1], "c"}, {any5, bufs[0], "a"}}
	for _, w := range want {
		st, err := c[1].Wait(w.r)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(w.buf[:st.Count]); got != w.body {
			t.Fatalf("receive got %q, want %q", got, w.body)
		}
	}
	if got := fused(c[1]) - before; got != 3 {
		t.Fatalf("%d frames took the fused path, want 3", got)
	}
}

// A Wait whose message is too long for the receive's buffer leaves it
// to the general path, which truncates it.
func TestFusedWaitLeavesTruncationToTheGeneralPath(t *testing.T) {
	c := twoRanks(t)
	send(t, c[0], "warm", 1, 9)
	if got := recvString(t, c[1], 0, 9); got != "warm" {
		t.Fatalf("tag 9 got %q", got)
	}
	buf := make([]byte, 4)
	r, _ := c[1].Irecv(buf, 0, 5)
	send(t, c[0], "longer than four", 1, 5)
	st, err := c[1].Wait(r)
	if !errors.Is(err, core.ErrTruncated) || st.Count != 4 || string(buf) != "long" {
		t.Fatalf("got %v, %d bytes %q", err, st.Count, buf)
	}
}

// A window completed by the fused Wait reports each receive's source,
// tag (a wildcard's included) and count, as the general path would.
func TestFusedWaitallReportsEachReceivesStatus(t *testing.T) {
	c := twoRanks(t)
	warm(t, c)
	const n = 8
	bufs := make([][]byte, n)
	rs := make([]*pml.Request, n)
	for i := range n {
		bufs[i] = make([]byte, 16)
		tag := 10 + i
		if i%2 == 1 {
			tag = pml.AnyTag
		}
		rs[i], _ = c[1].Irecv(bufs[i], 0, tag)
	}
	for i := range n {
		send(t, c[0], string(bytes.Repeat([]byte{'a' + byte(i)}, i+1)), 1, 10+i)
	}
	before, released := fused(c[1]), fusedReleased(c[1])
	sts := make([]pml.Status, n)
	if err := c[1].Waitall(rs, sts); err != nil {
		t.Fatal(err)
	}
	if got := fused(c[1]) - before; got != n {
		t.Fatalf("%d of %d receives took the fused path", got, n)
	}
	// The window had arrived: Waitall took it and released it at once
	// (takeFastRun).
	if got := fusedReleased(c[1]) - released; got != n {
		t.Fatalf("Waitall took %d of %d arrived receives at once", got, n)
	}
	for i, st := range sts {
		want := pml.Status{Source: 0, Tag: 10 + i, Count: i + 1}
		if st != want || string(bufs[i][:st.Count]) != string(bytes.Repeat([]byte{'a' + byte(i)}, i+1)) {
			t.Fatalf("receive %d: %+v %q, want %+v", i, st, bufs[i][:st.Count], want)
		}
	}
}

// A receive freed while posted still takes its message, first in posted
// order, when the fused Wait of a later receive delivers it — and then
// goes back to the pool: a round of them allocates nothing.
func TestFusedWaitRecyclesAReceiveFreedWhilePosted(t *testing.T) {
	c := twoRanks(t)
	warm(t, c)
	freed, later := make([]byte, 8), make([]byte, 8)
	first, second := []byte("first"), []byte("second")
	round := func() {
		r, _ := c[1].Irecv(freed, 0, 3)
		if err := c[1].Free(r); err != nil {
			t.Fatal(err)
		}
		w, _ := c[1].Irecv(later, 0, 3)
		c[0].Send(first, 1, 3)
		c[0].Send(second, 1, 3)
		if st, err := c[1].Wait(w); err != nil || string(later[:st.Count]) != "second" {
			t.Fatalf("Wait = %+v %v %q, want second", st, err, later[:st.Count])
		}
		if string(freed[:5]) != "first" {
			t.Fatalf("the freed receive got %q, want first", freed[:5])
		}
		clear(freed)
	}
	takesPathAllocatingNothing(t, round, func() int64 { return fused(c[1]) }, "Wait behind a freed receive")
}

func fusedReleased(c *pml.Comm) int64 {
	return c.Metrics().Counter("pml.fused_released").Load()
}

// A receive Waitall took and released at once (takeFastRun) is released:
// its entry is nil, a Test of the old handle is an error, and a round of
// windows allocates nothing.
func TestWaitallReleasesTheArrivedWindowItTakes(t *testing.T) {
	c := twoRanks(t)
	warm(t, c)
	buf := make([]byte, 8)
	rs := make([]*pml.Request, 8)
	round := func() {
		for i := range rs {
			rs[i], _ = c[1].Irecv(buf, 0, 2)
		}
		for range rs {
			c[0].Send(buf, 1, 2)
		}
		c[1].Waitall(rs, nil)
	}
	round()
	rs[0], _ = c[1].Irecv(buf, 0, 2)
	old := rs[0]
	c[0].Send(buf, 1, 2)
	rs[1], _ = c[1].Irecv(buf, 0, 2) // behind rs[0]: no fused Irecv
	c[0].Send(buf, 1, 2)
	if err := c[1].Waitall(rs[:2], nil); err != nil || rs[0] != nil || rs[1] != nil {
		t.Fatalf("Waitall = %v, entries %v", err, rs[:2])
	}
	if _, _, err := c[1].Test(old); !errors.Is(err, pml.ErrInvalid) {
		t.Fatalf("Test of a receive Waitall released: %v, want ErrInvalid", err)
	}
	takesPathAllocatingNothing(t, round, func() int64 { return fusedReleased(c[1]) }, "Waitall's arrived window")
}

// Waitall takes a frame into its window's receive only when that receive
// is the one MPI's order gives it to: a wildcard receive posted earlier
// gets the first message, a frame of another tag or too long for the
// buffer is left to the general path, and the rest of the window still
// gets what it should.
func TestWaitallTakesAFrameOnlyIntoTheReceiveFirstInLine(t *testing.T) {
	c := twoRanks(t)
	warm(t, c)
	early := make([]byte, 8)
	any, _ := c[1].Irecv(early, pml.AnySource, 5)
	bufs := [][]byte{make([]byte, 8), make([]byte, 8), make([]byte, 2), make([]byte, 8)}
	tags := []int{5, 6, 5, 5}
	rs := make([]*pml.Request, len(bufs))
	for i := range rs {
		rs[i], _ = c[1].Irecv(bufs[i], 0, tags[i])
	}
	// any takes "first"; rs[0] "second"; rs[1] (tag 6) waits for "sixth",
	// sent after "long", which rs[2] truncates; rs[3] gets "last".
	for _, m := range []struct {
		s   string
		tag int
	}{{"first", 5}, {"second", 5}, {"long", 5}, {"last", 5}, {"sixth", 6}} {
		send(t, c[0], m.s, 1, m.tag)
	}
	sts := make([]pml.Status, len(rs))
	err := c[1].Waitall(rs, sts)
	if !errors.Is(err, core.ErrTruncated) {
		t.Fatalf("Waitall = %v, want the truncation of the short receive", err)
	}
	want := []string{"second", "sixth", "lo", "last"}
	for i, w := range want {
		if got := string(bufs[i][:sts[i].Count]); got != w {
			t.Fatalf("receive %d got %q, want %q", i, got, w)
		}
	}
	st, err := c[1].Wait(any)
	if err != nil || string(early[:st.Count]) != "first" {
		t.Fatalf("the earlier wildcard receive got %q (%v), want first", early[:st.Count], err)
	}
}
