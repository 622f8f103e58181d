package plugins

import (
	"errors"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/rs/zerolog"
)

// loopLink answers every batch at once with one decision per event,
// without gRPC: it isolates the proxy for allocation counting.
type loopLink struct {
	acks chan loopAnswer
	fail chan error
}

type loopAnswer struct {
	seq uint64
	n   int
}

func newLoopLink() *loopLink {
	return &loopLink{acks: make(chan loopAnswer, maxInflight), fail: make(chan error, 1)}
}

func (l *loopLink) send(seq uint64, es []core.FlowEvent) error {
	l.acks <- loopAnswer{seq, len(es)}
	return nil
}

func (l *loopLink) recv(dst []core.FlowDecision) (uint64, []core.FlowDecision, error) {
	select {
	case a := <-l.acks:
		for i := 0; i < a.n; i++ {
			dst = append(dst, core.FlowDecision{Kind: core.FlowSetThreshold, Value: int64(i)})
		}
		return a.seq, dst, nil
	case err := <-l.fail:
		return 0, dst, err
	}
}

func (l *loopLink) closeSend() {}

func newLoopProxy(t testing.TB) (*proxy[core.FlowEvent, core.FlowDecision], *loopLink) {
	l := newLoopLink()
	px := newProxy[core.FlowEvent, core.FlowDecision]("test policy", zerolog.Nop(), time.Hour, false, l, newProxyStats(nil, "t"))
	px.newFallback = func() (observer[core.FlowEvent, core.FlowDecision], string, error) {
		return &recorder{}, "recorder", nil
	}
	px.run()
	t.Cleanup(func() {
		px.close()
		l.fail <- errors.New("closed")
		px.wait()
	})
	return px, l
}

func TestObserveDoesNotAllocateInSteadyState(t *testing.T) {
	px, _ := newLoopProxy(t)
	events := make([]core.FlowEvent, 16)
	out := make([]core.FlowDecision, 0, 1<<12)
	// Grow every buffer to the traffic first.
	for i := 0; i < 2000; i++ {
		out = px.Observe(events, out[:0])
	}
	allocs := testing.AllocsPerRun(2000, func() {
		out = px.Observe(events, out[:0])
		out = px.Observe(nil, out[:0])
	})
	if allocs != 0 {
		t.Fatalf("Observe allocates %.2f times per call in steady state", allocs)
	}
}

func TestObserveNeverWaitsForAStuckPlugin(t *testing.T) {
	// A link whose send never returns: the plugin stopped reading.
	stuck := &stuckLink{release: make(chan struct{})}
	px := newProxy[core.FlowEvent, core.FlowDecision]("test policy", zerolog.Nop(), time.Hour, false, stuck, newProxyStats(nil, "t"))
	px.run()
	defer func() { close(stuck.release); px.close(); px.wait() }()
	events := make([]core.FlowEvent, 64)
	done := make(chan struct{})
	go func() {
		// Far more than maxPending: the excess is dropped, never waited on.
		for i := 0; i < 4*maxPending/len(events); i++ {
			px.Observe(events, nil)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Observe blocked behind a plugin that does not read")
	}
	px.mu.Lock()
	dropped := px.dropped
	px.mu.Unlock()
	if dropped == 0 {
		t.Fatal("nothing was dropped although the plugin read nothing")
	}
}

type stuckLink struct{ release chan struct{} }

func (s *stuckLink) send(uint64, []core.FlowEvent) error { <-s.release; return errors.New("released") }
func (s *stuckLink) recv(dst []core.FlowDecision) (uint64, []core.FlowDecision, error) {
	<-s.release
	return 0, dst, errors.New("released")
}
func (s *stuckLink) closeSend() {}

func TestAnOutOfOrderAnswerFailsThePlugin(t *testing.T) {
	px, l := newLoopProxy(t)
	px.Observe([]core.FlowEvent{{Value: 1}}, nil)
	waitFor(t, "the first answer", 10*time.Second, func() bool { return px.ackedSeq.Load() == 1 })
	l.acks <- loopAnswer{seq: 5, n: 1} // an answer for a batch never sent
	select {
	case <-px.failed:
	case <-time.After(10 * time.Second):
		t.Fatal("a protocol error went unnoticed")
	}
	if px.err == nil {
		t.Fatal("no error recorded")
	}
}

func TestTheReplayToTheFallbackIsBoundedAndInOrder(t *testing.T) {
	stuck := &stuckLink{release: make(chan struct{})}
	px := newProxy[core.FlowEvent, core.FlowDecision]("test policy", zerolog.Nop(), time.Hour, false, stuck, newProxyStats(nil, "t"))
	rec := &recorder{}
	px.newFallback = func() (observer[core.FlowEvent, core.FlowDecision], string, error) { return rec, "recorder", nil }
	px.run()
	defer func() { close(stuck.release); px.close(); px.wait() }()
	events := make([]core.FlowEvent, 1000)
	for i := 0; i < 3*maxPending/len(events); i++ {
		for j := range events {
			events[j].Value = int64(i*len(events) + j)
		}
		px.Observe(events, nil)
	}
	px.fail(errors.New("test failure"))
	<-px.failed
	px.Observe(nil, nil)
	got := rec.values()
	if len(got) == 0 || len(got) > maxPending {
		t.Fatalf("the fallback replayed %d events, want 1..%d", len(got), maxPending)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("replay out of order at %d: %d after %d", i, got[i], got[i-1])
		}
	}
}
