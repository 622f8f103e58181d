package core

import (
	"testing"
	"time"
)

// A full set drops its oldest connection to take a new one; one that
// waited past the timeout goes at the next admission; one that proved
// itself (Done) is never dropped.
func TestPendingDropsTheOldestAndTheStale(t *testing.T) {
	p := &Pending{Max: 3, Timeout: 10 * time.Second}
	dropped := map[int]int{}
	admit := func(id int, at time.Duration) *PendingConn {
		return p.Admit(at, func() { dropped[id]++ })
	}
	c0 := admit(0, 0)
	admit(1, time.Second)
	c0.Done()
	admit(2, 2*time.Second)
	admit(3, 3*time.Second)
	if len(dropped) != 0 || p.Len() != 3 {
		t.Fatalf("dropped %v with %d pending", dropped, p.Len())
	}
	admit(4, 4*time.Second) // full: 1, the oldest still waiting, goes
	if dropped[1] != 1 || len(dropped) != 1 || p.Len() != 3 {
		t.Fatalf("dropped %v with %d pending", dropped, p.Len())
	}
	admit(5, 12*time.Second+time.Millisecond) // 2 has waited just over 10 s, 3 not
	if dropped[2] != 1 || dropped[3] != 0 || p.Len() != 3 {
		t.Fatalf("dropped %v with %d pending", dropped, p.Len())
	}
	if dropped[0] != 0 {
		t.Fatal("a connection that proved itself was dropped")
	}
}

// A drop function may call Done on its own entry (the connection's end
// takes it out of the set) without a deadlock; Done twice counts once.
func TestPendingDropMayCallDone(t *testing.T) {
	p := &Pending{Max: 1}
	var first *PendingConn
	first = p.Admit(0, func() { first.Done(); first.Done() })
	p.Admit(time.Millisecond, func() {})
	if p.Len() != 1 {
		t.Fatalf("%d pending, want 1", p.Len())
	}
}

// Entries that are gone do not pile up behind one old connection.
func TestPendingKeepsItsQueueShort(t *testing.T) {
	p := &Pending{}
	p.Admit(0, func() {})
	for i := range 10000 {
		p.Admit(time.Duration(i), func() {}).Done()
	}
	if p.Len() != 1 || len(p.q) > 2*p.live+65 {
		t.Fatalf("%d pending in a queue of %d", p.Len(), len(p.q))
	}
}

func TestAcceptRetryDoublesToItsBound(t *testing.T) {
	var r AcceptRetry
	var got []time.Duration
	for range 10 {
		got = append(got, r.Next())
	}
	if got[0] != AcceptPauseMin || got[1] != 2*AcceptPauseMin || got[9] != AcceptPauseMax {
		t.Fatalf("pauses %v", got)
	}
	r.Reset()
	if r.Next() != AcceptPauseMin {
		t.Fatal("Reset did not start over")
	}
}
