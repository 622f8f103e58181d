package pml

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// The PML's hooks for a layer above it: communicators over some ranks
// (Derive), the collective context, operations that requests stand for
// (Start), and the completion family's context, all/any/some forms.

func TestADerivedCommunicatorSpeaksItsOwnRanks(t *testing.T) {
	w := newWorld(t, 5, oneRail, Options{})
	w.run(t, func(c *Comm) error {
		// Ranks 4, 2, 0 in that order (1 and 3 stay out and make none).
		if c.Rank()%2 == 1 {
			return nil
		}
		next := c.NextContext()
		d, err := c.Derive(next, []int{4, 2, 0})
		if err != nil {
			return err
		}
		if want := 2 - c.Rank()/2; d.Rank() != want || d.Size() != 3 {
			return fmt.Errorf("job rank %d is %d of %d, want %d of 3", c.Rank(), d.Rank(), d.Size(), want)
		}
		if c.NextContext() != next+2 {
			return fmt.Errorf("next context %d after deriving on %d", c.NextContext(), next)
		}
		// A ring on the new ranks, received from AnySource: the status
		// names the sender by its new rank.
		me, n := d.Rank(), d.Size()
		in := make([]byte, 1)
		r, err := d.Irecv(in, AnySource, 9)
		if err != nil {
			return err
		}
		s, err := d.Isend([]byte{byte(me)}, (me+1)%n, 9)
		if err != nil {
			return err
		}
		sts := make([]Status, 2)
		if err := d.Waitall([]*Request{r, s}, sts); err != nil {
			return err
		}
		if prev := (me - 1 + n) % n; sts[0].Source != prev || in[0] != byte(prev) {
			return fmt.Errorf("got %d from source %d, want from %d", in[0], sts[0].Source, prev)
		}
		if sts[1].Source != me {
			return fmt.Errorf("a send's status names source %d, want %d", sts[1].Source, me)
		}
		ok, st, err := d.Iprobe(AnySource, AnyTag)
		if err != nil || ok {
			return fmt.Errorf("probe found %v %+v %v on a drained communicator", ok, st, err)
		}
		return nil
	})
}

func TestDeriveRefusesAContextInUseAndARankNotAMember(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	c := w.comms[0]
	if _, err := c.Derive(0, []int{0, 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("context 0 again: %v", err)
	}
	if _, err := c.Derive(c.NextContext(), []int{1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a group without this rank: %v", err)
	}
	if _, err := c.Derive(c.NextContext(), []int{0, 0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a rank named twice: %v", err)
	}
}

func TestTheCollectiveContextNeverMatchesPointToPoint(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	w.run(t, func(c *Comm) error {
		x := c.Collectives()
		if c.Rank() == 0 {
			if err := x.Send([]byte("coll"), 1, 3); err != nil {
				return err
			}
			return c.Send([]byte("p2p!"), 1, 3)
		}
		// The point-to-point receive, posted first, must get the
		// point-to-point message although the collective one came first.
		b := make([]byte, 4)
		if _, err := c.Recv(b, 0, 3); err != nil || string(b) != "p2p!" {
			return fmt.Errorf("point-to-point receive got %q %v", b, err)
		}
		if _, err := x.Recv(b, 0, 3); err != nil || string(b) != "coll" {
			return fmt.Errorf("collective receive got %q %v", b, err)
		}
		return nil
	})
}

// countdown is an Op that finishes after n advances.
type countdown struct {
	n   atomic.Int32
	err error
}

func (o *countdown) Advance() (bool, error) { return o.n.Add(-1) <= 0, o.err }

func TestAStartedOperationCompletesItsRequestThroughAnyWait(t *testing.T) {
	w := newWorld(t, 1, nil, Options{})
	c := w.comms[0]
	boom := errors.New("boom")
	op := &countdown{err: boom}
	op.n.Store(50)
	r, err := c.Start(op)
	if err != nil {
		t.Fatal(err)
	}
	// Waiting on an unrelated receive advances the operation too.
	in := make([]byte, 1)
	rr, _ := c.Irecv(in, 0, 1)
	for op.n.Load() > 0 {
		if ok, _, _ := c.Test(rr); ok {
			t.Fatal("the receive completed with nothing sent")
		}
	}
	if _, err := c.Wait(r); !errors.Is(err, boom) {
		t.Fatalf("the request finished with %v, want the operation's error", err)
	}
	if err := c.Send([]byte{1}, 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(rr); err != nil {
		t.Fatal(err)
	}
}

func TestWaitContextLeavesTheRequestValid(t *testing.T) {
	w := newWorld(t, 1, nil, Options{})
	c := w.comms[0]
	in := make([]byte, 2)
	r, _ := c.Irecv(in, 0, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.WaitContext(ctx, r); err != context.DeadlineExceeded {
		t.Fatalf("wait returned %v, want the context's error", err)
	}
	rs := []*Request{r}
	if err := c.WaitallContext(ctx, rs, nil); err != context.DeadlineExceeded || rs[0] != r {
		t.Fatalf("waitall returned %v and left %v", err, rs[0])
	}
	if _, err := c.ProbeContext(ctx, 0, 5); err != context.DeadlineExceeded {
		t.Fatalf("probe returned %v", err)
	}
	if _, err := c.RecvContext(ctx, make([]byte, 1), 0, 6); err != context.DeadlineExceeded {
		t.Fatalf("recv returned %v", err)
	}
	// The cancelled RecvContext took its receive back: this message goes
	// to r, not to it.
	if err := c.Send([]byte("hi"), 0, 4); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(r); err != nil || st.Count != 2 || string(in) != "hi" {
		t.Fatalf("the request, waited again: %+v %v %q", st, err, in)
	}
	if err := c.Send([]byte("x"), 0, 6); err != nil {
		t.Fatal(err)
	}
	if ok, st, _ := c.Iprobe(0, 6); !ok || st.Count != 1 {
		t.Fatalf("the message for the cancelled receive: probe %v %+v", ok, st)
	}
}

func TestTestallTestanyAndWaitsome(t *testing.T) {
	w := newWorld(t, 1, nil, Options{})
	c := w.comms[0]
	bufs := [3][]byte{make([]byte, 1), make([]byte, 1), make([]byte, 1)}
	rs := make([]*Request, 3)
	for i := range rs {
		rs[i], _ = c.Irecv(bufs[i], 0, i)
	}
	sts := make([]Status, 3)
	if ok, err := c.Testall(rs, sts); ok || err != nil {
		t.Fatalf("testall with nothing sent: %v %v", ok, err)
	}
	if i, ok, _, _ := c.Testany(rs); ok || i != -1 {
		t.Fatalf("testany with nothing sent: %d %v", i, ok)
	}
	c.Send([]byte{1}, 0, 1)
	if ok, _ := c.Testall(rs, sts); ok {
		t.Fatal("testall with one of three done")
	}
	if rs[1] == nil {
		t.Fatal("testall released a request while others were pending")
	}
	if i, ok, st, err := c.Testany(rs); !ok || i != 1 || st.Tag != 1 || err != nil || rs[1] != nil {
		t.Fatalf("testany: %d %v %+v %v", i, ok, st, err)
	}
	c.Send([]byte{0}, 0, 0)
	c.Send([]byte{2}, 0, 2)
	idx := make([]int, 3)
	n, err := c.Waitsome(rs, idx, sts)
	if err != nil || n != 2 || idx[0] != 0 || idx[1] != 2 || sts[1].Tag != 2 {
		t.Fatalf("waitsome: %d %v %v %+v", n, err, idx[:n], sts[:n])
	}
	if n, err := c.Waitsome(rs, idx, sts); n != 0 || err != nil {
		t.Fatalf("waitsome with nothing left: %d %v", n, err)
	}
	if ok, err := c.Testall(rs, sts); !ok || err != nil {
		t.Fatalf("testall of nothing: %v %v", ok, err)
	}
	if !bytes.Equal(append(append(bufs[0], bufs[1]...), bufs[2]...), []byte{0, 1, 2}) {
		t.Fatalf("received %v", bufs)
	}
}

func TestFreeRecyclesARequestWhenItCompletes(t *testing.T) {
	w := newWorld(t, 1, nil, Options{})
	c := w.comms[0]
	in := make([]byte, 1)
	r, _ := c.Irecv(in, 0, 1)
	if err := c.Free(r); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(r); !errors.Is(err, ErrInvalid) {
		t.Fatalf("wait on a freed request: %v", err)
	}
	if err := c.Send([]byte{7}, 0, 1); err != nil {
		t.Fatal(err)
	}
	c.Progress()
	if in[0] != 7 {
		t.Fatal("the freed receive did not go on")
	}
}

func TestLostReportsAMemberLostAnywhere(t *testing.T) {
	w := newWorld(t, 3, oneRail, Options{FinalizeTimeout: 100 * time.Millisecond})
	w.noFinalize = true
	c := w.comms[0]
	if err := c.Lost(); err != nil {
		t.Fatal(err)
	}
	w.f.Drop(0, 0, 2)
	deadline := time.Now().Add(10 * time.Second)
	for c.Lost() == nil {
		if time.Now().After(deadline) {
			t.Fatal("rank 0 never learnt that rank 2 was lost")
		}
		c.Progress()
	}
	if !errors.Is(c.Lost(), core.ErrPeerLost) {
		t.Fatalf("Lost: %v", c.Lost())
	}
	d, err := c.Derive(c.NextContext(), []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Lost(); err != nil {
		t.Fatalf("a communicator without rank 2 reports %v", err)
	}
}

// countingClock counts its readings; a waiter reads the clock only once
// its backoff has gone past spinning and yielding (backoff.stalled).
type countingClock struct{ reads atomic.Int64 }

func (c *countingClock) Now() time.Duration { c.reads.Add(1); return 0 }

// selfPinger is an Op that sends itself a message on every Advance and
// receives it with a Test of its own, so that its polls, not the
// waiter's, find every event.
type selfPinger struct {
	c    *Comm
	left int
	buf  [1]byte
}

func (o *selfPinger) Advance() (bool, error) {
	r, err := o.c.Irecv(o.buf[:], 0, 7)
	if err != nil {
		return true, err
	}
	if err := o.c.Send(o.buf[:], 0, 7); err != nil {
		return true, err
	}
	if _, err := o.c.Wait(r); err != nil {
		return true, err
	}
	o.left--
	return o.left == 0, nil
}

// A waiter whose own polls find nothing while the operations it advances
// find events (a blocking collective waiting on its Start request) is
// making progress: its backoff must start over, never climb into the
// sleeps that would stall the collective between its rounds.
func TestAWaiterWhoseOperationsProgressDoesNotBackOff(t *testing.T) {
	clk := &countingClock{}
	w := newWorld(t, 1, nil, Options{
		Clock:        clk,
		StallTimeout: time.Hour,
		Backoff:      Backoff{Spin: 2, Yield: 1, Sleep: time.Microsecond, MaxSleep: time.Microsecond},
	})
	c := w.comms[0]
	op := &selfPinger{c: c, left: 200}
	r, err := c.Start(op)
	if err != nil {
		t.Fatal(err)
	}
	before := clk.reads.Load()
	if _, err := c.Wait(r); err != nil {
		t.Fatal(err)
	}
	if n := clk.reads.Load() - before; n != 0 {
		t.Fatalf("the waiter read the clock %d times: its backoff went past spinning while its operation progressed", n)
	}
}

// Finished only looks (an Op's Advance, whose caller has just polled):
// a message that has come but that no poll has taken in leaves its
// receive pending; once one has, it releases every request as Testall
// does.
func TestFinishedLooksWithoutPolling(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	c0, c1 := w.comms[0], w.comms[1]
	in := make([]byte, 1)
	r, err := c0.Irecv(in, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Send([]byte{7}, 0, 1); err != nil {
		t.Fatal(err)
	}
	rs, sts := []*Request{nil, r}, make([]Status, 2)
	if ok, err := c0.Finished(rs, sts); ok || err != nil || rs[1] == nil {
		t.Fatalf("finished before a poll took the message in: %v %v", ok, err)
	}
	if ok, err := c0.Finished(rs, sts[:1]); ok || !errors.Is(err, ErrInvalid) {
		t.Fatalf("finished with too few statuses: %v %v", ok, err)
	}
	c0.Progress()
	if ok, err := c0.Finished(rs, sts); !ok || err != nil || rs[1] != nil || sts[1].Count != 1 || sts[1].Source != 1 || in[0] != 7 {
		t.Fatalf("finished after the poll: %v %v %v %+v %v", ok, err, rs, sts[1], in)
	}
	if ok, err := c0.Finished([]*Request{r}, nil); ok || !errors.Is(err, ErrInvalid) {
		t.Fatalf("finished on a released request: %v %v", ok, err)
	}
}
