package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRanksRunOneAtATimeInADeterministicOrder(t *testing.T) {
	trace := func() string {
		s := New("t-order", 4, Options{})
		var b strings.Builder
		err := s.Run(func(r int) error {
			for i := 0; i < 3; i++ {
				fmt.Fprintf(&b, "%d@%v ", r, s.Now())
				s.Compute(time.Duration(r+1) * time.Microsecond)
			}
			return s.Boot(r).Fence(context.Background())
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "end@%v", s.Now())
		return b.String()
	}
	a, b := trace(), trace()
	if a != b {
		t.Fatalf("two runs differ:\n%s\n%s", a, b)
	}
	if !strings.HasPrefix(a, "0@0s 1@0s 2@0s 3@0s 0@1µs 1@2µs 0@2µs") || !strings.HasSuffix(a, "end@12µs") {
		t.Fatalf("unexpected schedule %s", a)
	}
}

func TestAnIdleRankWakesOnNotifyOrItsTimer(t *testing.T) {
	s := New("t-idle", 2, Options{IdleMin: 5 * time.Microsecond, IdleMax: 5 * time.Microsecond})
	var woke time.Duration
	err := s.Run(func(r int) error {
		if r == 1 {
			s.At(3*time.Microsecond, func() { s.Notify(0) })
			return nil
		}
		s.Idle() // nothing pending: waits for the notify at 3µs
		woke = s.Now()
		s.Idle() // the notify was consumed: the timer wakes it 5µs later
		if s.Now() != woke+5*time.Microsecond {
			return fmt.Errorf("timer woke rank 0 at %v", s.Now())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if woke != 3*time.Microsecond {
		t.Fatalf("woke at %v, want 3µs", woke)
	}
}

func TestAJobWhoseRanksAllWaitStalls(t *testing.T) {
	s := New("t-stall", 2, Options{StallAfter: time.Millisecond})
	err := s.Run(func(r int) error {
		for {
			s.Idle() // waits for an event that never comes
		}
	})
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("got %v, want ErrStalled", err)
	}
}

// TestAStallWithNothingPendingStillReportsTheRanksErrors: a rank that
// failed leaves the other in a fence forever, with no event pending. The
// OnStall hook releases the waiter; Run must then collect both ranks
// rather than return nil with the failure unsaid.
func TestAStallWithNothingPendingStillReportsTheRanksErrors(t *testing.T) {
	s := New("t-stall-fence", 2, Options{})
	boom := errors.New("boom")
	stalls := 0
	s.OnStall(func(error) { stalls++ })
	err := s.Run(func(r int) error {
		if r == 0 {
			return boom
		}
		return s.Boot(r).Fence(context.Background())
	})
	if !errors.Is(err, boom) || stalls != 1 {
		t.Fatalf("got %v after %d stalls, want rank 0's error after 1", err, stalls)
	}
}

// Events leave the queue by time and, at equal times, in the order they
// were pushed.
func TestEventsLeaveByTimeThenByOrderPushed(t *testing.T) {
	var h eventHeap
	rng := uint64(7)
	for seq := uint64(1); seq <= 1000; seq++ {
		rng = rng*6364136223846793005 + 1442695040888963407
		h.push(event{t: time.Duration(rng >> 58), seq: seq})
	}
	var last event
	for i := 0; len(h) > 0; i++ {
		e := h.pop()
		if i > 0 && (e.t < last.t || e.t == last.t && e.seq < last.seq) {
			t.Fatalf("event (%v, %d) left after (%v, %d)", e.t, e.seq, last.t, last.seq)
		}
		last = e
	}
}
