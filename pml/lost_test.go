package pml

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// PeerLost — the job's engine reporting a rank that ended without
// finalizing — fails the pending receives that name it or any source,
// and every later operation on it, with its error; it is a no-op for this
// rank itself and after Close.
func TestPeerLostFailsThePendingAndLaterOperationsOnTheRank(t *testing.T) {
	w := newWorld(t, 3, oneRail, Options{FinalizeTimeout: 100 * time.Millisecond})
	c := w.comms[0]
	named, err := c.Irecv(make([]byte, 8), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	anySrc, err := c.Irecv(make([]byte, 8), AnySource, 0)
	if err != nil {
		t.Fatal(err)
	}
	gone := fmt.Errorf("the launcher reports rank 1 (pid 7) exited with status 0 before Close: %w", core.ErrPeerLost)
	c.PeerLost(0, gone) // itself: nothing
	c.PeerLost(1, gone)
	for name, r := range map[string]*Request{"a receive from rank 1": named, "a receive from any source": anySrc} {
		if _, err := c.Wait(r); !errors.Is(err, core.ErrPeerLost) || !strings.Contains(err.Error(), "exited with status 0 before Close") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := c.Send(make([]byte, 1<<20), 1, 0); !errors.Is(err, core.ErrPeerLost) {
		t.Errorf("a later send to rank 1: %v", err)
	}
	if err := c.Lost(); !errors.Is(err, core.ErrPeerLost) {
		t.Errorf("Lost: %v", err)
	}
	// Rank 2 is untouched.
	if err := w.comms[2].Send([]byte("x"), 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(make([]byte, 1), 2, 5); err != nil {
		t.Fatalf("a receive from rank 2: %v", err)
	}
	w.comms[1].Abort(errors.New("gone"))
	w.close()
	c.PeerLost(2, gone) // after Close: nothing
}

// A wait that gives up says which bound fired: the stall timeout, or the
// caller's deadline — Close's finalize said "no progress for 0s" when
// its 30 s ran out with no stall timeout set.
func TestAStallSaysWhichBoundFired(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{StallTimeout: 50 * time.Millisecond, FinalizeTimeout: 150 * time.Millisecond,
		Backoff: Backoff{Spin: 10, Yield: 10, Sleep: time.Millisecond, MaxSleep: time.Millisecond}})
	c := w.comms[0]
	r, err := c.Irecv(make([]byte, 8), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(r); !errors.Is(err, core.ErrStalled) || !strings.Contains(err.Error(), "no progress for 50ms") {
		t.Fatalf("a stalled wait: %v", err)
	}
	c.Cancel(r)
	c.Wait(r)

	w = newWorld(t, 2, oneRail, Options{FinalizeTimeout: 150 * time.Millisecond})
	err = w.comms[0].Close() // rank 1 never closes
	if !errors.Is(err, core.ErrStalled) || !strings.Contains(err.Error(), "did not all close within 150ms") ||
		!strings.Contains(err.Error(), "not done by its deadline") || strings.Contains(err.Error(), "no progress for 0s") {
		t.Fatalf("a finalize that ran out of time: %v", err)
	}
	w.comms[1].Abort(errors.New("the test is over"))
}

// After an operation of this rank failed — here a truncated receive —
// Close meets the other ranks within FailedFinalize, not the finalize
// timeout: they may be blocked on a message this rank will not send. A
// rank that failed nothing waits the whole timeout.
func TestCloseAfterAFailureMeetsTheOthersOnlyBriefly(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{FinalizeTimeout: time.Minute})
	a, b := w.comms[0], w.comms[1]
	if err := b.Send(make([]byte, 16), 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Recv(make([]byte, 8), 1, 0); !errors.Is(err, core.ErrTruncated) {
		t.Fatalf("receive: %v", err)
	}
	start := time.Now()
	err := a.Close() // rank 1 waits elsewhere, never closes
	took := time.Since(start)
	if !errors.Is(err, core.ErrStalled) || !strings.Contains(err.Error(), fmt.Sprintf("within %v of this rank's failure", FailedFinalize)) ||
		!strings.Contains(err.Error(), "message truncated") {
		t.Fatalf("Close after a truncated receive: %v", err)
	}
	b.Abort(errors.New("the test is over"))
	t.Logf("Close gave up after %v", took.Round(time.Millisecond))
}
