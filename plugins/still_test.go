package plugins

import (
	"errors"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/rs/zerolog"
)

// handLink hands every batch the proxy sends to the test, which answers
// each with the decisions it chooses.
type handLink struct {
	sent    chan []core.FlowEvent
	answers chan []core.FlowDecision
	seq     uint64
}

func (l *handLink) send(seq uint64, es []core.FlowEvent) error {
	l.sent <- append([]core.FlowEvent(nil), es...)
	return nil
}

func (l *handLink) recv(dst []core.FlowDecision) (uint64, []core.FlowDecision, error) {
	ds, ok := <-l.answers
	if !ok {
		return 0, dst, errors.New("closed")
	}
	l.seq++
	return l.seq, append(dst, ds...), nil
}

func (l *handLink) closeSend() {}

func (l *handLink) next(t *testing.T) []core.FlowEvent {
	t.Helper()
	select {
	case b := <-l.sent:
		return b
	case <-time.After(20 * time.Second):
		t.Fatal("no batch sent")
		return nil
	}
}

// A FlowQuiet in the answer to a batch keeps the points it names from the
// plugin — but only while nothing else has happened since that batch: an
// event of another sort queued before the statement arrives, or after it,
// ends it, and every event from then on goes. The statements are the
// host's; the mechanism never sees them.
func TestQuietPointsStayHomeUntilSomethingElseHappens(t *testing.T) {
	l := &handLink{sent: make(chan []core.FlowEvent, maxInflight), answers: make(chan []core.FlowDecision)}
	stats := newProxyStats(nil, "t")
	px := newProxy[core.FlowEvent, core.FlowDecision]("test policy", zerolog.Nop(), time.Hour, false, l, stats)
	px.stillOps = flowStill
	px.run()
	defer func() { px.close(); close(l.answers); px.wait() }()

	mon := core.FlowEvent{Kind: core.FlowMonitor, Peer: 1, Quota: 40}
	other := core.FlowEvent{Kind: core.FlowMonitor, Peer: 0, Quota: 2}
	quiet := core.FlowDecision{Kind: core.FlowQuiet, Peer: 1, Value: 40}
	var out []core.FlowDecision
	answer := func(ds ...core.FlowDecision) {
		t.Helper()
		acked := px.ackedSeq.Load()
		l.answers <- ds
		waitFor(t, "the answer", 20*time.Second, func() bool { return px.ackedSeq.Load() > acked })
		out = px.Observe(nil, out)
	}

	px.Observe([]core.FlowEvent{mon}, nil)
	if b := l.next(t); len(b) != 1 {
		t.Fatalf("first batch %v", b)
	}
	// Sender 0 reaches a point while the statement is on its way: the
	// statement predates it and does not hold.
	px.Observe([]core.FlowEvent{other}, nil)
	answer(quiet)
	if b := l.next(t); len(b) != 1 || b[0] != other {
		t.Fatalf("second batch %v, want %v", b, other)
	}
	px.Observe([]core.FlowEvent{mon}, nil) // waits for the answer in flight
	// The answer to the second batch holds: the point that waited, and
	// those after it, stay home; another quota does not.
	answer(quiet, core.FlowDecision{Kind: core.FlowSetQuota, Peer: 1, Value: 40})
	px.Observe([]core.FlowEvent{mon, mon}, nil)
	px.Observe([]core.FlowEvent{mon}, nil)
	if n := stats.stilled.Load(); n != 4 {
		t.Fatalf("%d points kept from the plugin, want 4", n)
	}
	moved := mon
	moved.Quota = 41
	px.Observe([]core.FlowEvent{mon, moved, mon}, nil)
	if b := l.next(t); len(b) != 2 || b[0] != moved || b[1] != mon {
		t.Fatalf("after another event: batch %v, want %v then %v", b, moved, mon)
	}
	answer()
	px.Observe([]core.FlowEvent{mon}, nil)
	if b := l.next(t); len(b) != 1 {
		t.Fatalf("an answer without the statement ends it: batch %v", b)
	}
	answer()
	if len(out) != 1 || out[0].Kind != core.FlowSetQuota {
		t.Fatalf("the mechanism got %v, want the one SetQuota", out)
	}
	if n := stats.stilled.Load(); n != 5 {
		t.Fatalf("%d points kept from the plugin, want 5", n)
	}
}
