package pml

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
)

func TestTrySendSendsAnEagerMessageAtOnceAndLeavesALongOneToIsend(t *testing.T) {
	w := newWorld(t, 2, []inproc.RailOptions{{EagerLimit: 1024}}, Options{})
	a, b := w.comms[0], w.comms[1]
	sent, err := a.TrySend([]byte("eight by"), 1, 5)
	if !sent || err != nil {
		t.Fatalf("TrySend of 8 bytes: sent %v, %v; want it sent", sent, err)
	}
	in := make([]byte, 8)
	if st, err := b.Recv(in, 0, 5); err != nil || string(in) != "eight by" || st.Count != 8 {
		t.Fatalf("received %q (%+v, %v)", in, st, err)
	}
	long := make([]byte, 4096)
	if sent, err := a.TrySend(long, 1, 6); sent || err != nil {
		t.Fatalf("TrySend of 4 KiB over a 1 KiB eager limit: sent %v, %v; want it left to Isend", sent, err)
	}
	b.Progress()
	if ok, _, _ := b.Iprobe(0, 6); ok {
		t.Fatal("a message TrySend declined arrived anyway")
	}
	// What it declined goes by Isend, in order with what it sent.
	r, err := a.Isend(long, 1, 6)
	if err != nil {
		t.Fatal(err)
	}
	sentc := make(chan error, 1)
	go func() { _, err := a.Wait(r); sentc <- err }()
	if st, err := b.Recv(make([]byte, 4096), 0, 6); err != nil || st.Count != 4096 {
		t.Fatalf("the long message: %+v, %v", st, err)
	}
	if err := <-sentc; err != nil {
		t.Fatal(err)
	}
	if sent, err := a.TrySend(in, 2, 5); !sent || !errors.Is(err, ErrInvalid) {
		t.Fatalf("TrySend to rank 2 of 2: sent %v, %v; want ErrInvalid", sent, err)
	}
}

// WaitRound waits like WaitallContext but gives up once a member of the
// communicator is lost — here rank 2, while rank 0 waits on rank 1, which
// is alive and never sends — where WaitallContext waits on.
func TestWaitRoundGivesUpWhenAnotherMemberIsLost(t *testing.T) {
	w := newWorld(t, 3, []inproc.RailOptions{{}}, Options{FinalizeTimeout: 100 * time.Millisecond})
	w.noFinalize = true
	a, c := w.comms[0], w.comms[2]
	// Rank 0 knows rank 2 before the link drops.
	if err := c.Send([]byte{1}, 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Recv(make([]byte, 1), 2, 1); err != nil {
		t.Fatal(err)
	}
	r, _ := a.Irecv(make([]byte, 8), 1, 2)
	rs, sts := []*Request{r}, make([]Status, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.WaitallContext(ctx, rs, sts); err != context.DeadlineExceeded {
		t.Fatalf("WaitallContext with no member lost: %v, want the deadline", err)
	}
	w.f.Drop(0, 0, 2)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second) // a hang fails, not waits
	defer cancel()
	if err := a.WaitRound(ctx, rs, sts, roundName("test round")); !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("WaitRound with rank 2 lost: %v, want ErrPeerLost", err)
	}
	if rs[0] != r {
		t.Fatal("WaitRound released the receive it gave up on")
	}
	_ = a.Cancel(r)
	if _, err := a.Wait(r); !errors.Is(err, core.ErrCanceled) {
		t.Fatalf("the receive after Cancel: %v", err)
	}
}

// While a goroutine waits in WaitRound, the state reports name its
// collective as an operation in progress; once it has returned, they do
// not.
func TestTheStateNamesTheCollectiveWaitingItsRound(t *testing.T) {
	w := newWorld(t, 2, []inproc.RailOptions{{}}, Options{})
	a, b := w.comms[0], w.comms[1]
	r, _ := a.Irecv(make([]byte, 8), 1, 2)
	rs := []*Request{r}
	done := make(chan error, 1)
	go func() { done <- a.WaitRound(context.Background(), rs, nil, roundName("allreduce (linear)")) }()
	const want = "allreduce (linear) in progress"
	var saw bool
	for end := time.Now().Add(10 * time.Second); !saw && time.Now().Before(end); time.Sleep(time.Millisecond) {
		for _, q := range a.State(time.Second).Requests {
			saw = saw || q.Kind == "operation" && q.Phase == want
		}
	}
	if !saw {
		t.Fatalf("the state never showed %q while the round waited", want)
	}
	if err := b.Send(make([]byte, 8), 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, q := range a.State(time.Second).Requests {
		if q.Kind == "operation" {
			t.Fatalf("after the round the state still shows %q", q.Phase)
		}
	}
}

// roundName names a test's round in the state reports.
type roundName string

func (n roundName) String() string { return string(n) }
