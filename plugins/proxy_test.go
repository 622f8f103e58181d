package plugins

import (
	"errors"
	"sync"
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

// recLink records every batch and answers it at once with no decision.
type recLink struct {
	mu      sync.Mutex
	batches [][]core.FlowEvent
	acks    chan uint64
	fail    chan error
}

func (l *recLink) send(seq uint64, es []core.FlowEvent) error {
	l.mu.Lock()
	l.batches = append(l.batches, append([]core.FlowEvent(nil), es...))
	l.mu.Unlock()
	l.acks <- seq
	return nil
}

func (l *recLink) recv(dst []core.FlowDecision) (uint64, []core.FlowDecision, error) {
	select {
	case a := <-l.acks:
		return a, dst, nil
	case err := <-l.fail:
		return 0, dst, err
	}
}

func (l *recLink) closeSend() {}

// reset forgets the batches sent so far.
func (l *recLink) reset() {
	l.mu.Lock()
	l.batches = nil
	l.mu.Unlock()
}

func (l *recLink) sent() [][]core.FlowEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]core.FlowEvent(nil), l.batches...)
}

// The engine's answers to a policy's quota proposals (core.FlowQuota)
// bring the policy no news: sent alone they cost a plugin round trip per
// batch of decisions. They wait for the next other event and go with it,
// before it, as a built-in policy would see them; with none coming they
// go after maxLinger.
func TestAnswersAloneWaitForTheNextEvent(t *testing.T) {
	l := &recLink{acks: make(chan uint64, maxInflight), fail: make(chan error, 1)}
	px := newProxy[core.FlowEvent, core.FlowDecision]("test policy", zerolog.Nop(), time.Hour, false, l, newProxyStats(nil, "t"))
	px.stillOps = flowStill
	px.run()
	defer func() { px.close(); l.fail <- errors.New("closed"); px.wait() }()

	answer := core.FlowEvent{Kind: core.FlowQuota, Peer: 1, Quota: 9}
	point := core.FlowEvent{Kind: core.FlowMonitor, Peer: 1, Quota: 9}
	// Whether the answer was held can only be seen before maxLinger is
	// over; a loaded machine may oversleep it, and then the answer has
	// rightly gone alone: that try proves nothing, and another is made.
	held := false
	for try := 0; try < 20 && !held; try++ {
		start := time.Now()
		px.Observe([]core.FlowEvent{answer}, nil)
		time.Sleep(maxLinger / 4)
		b := l.sent()
		if time.Since(start) >= maxLinger {
			waitFor(t, "the lone answer", 10*time.Second, func() bool { return len(l.sent()) > 0 })
			l.reset()
			continue
		}
		if len(b) != 0 {
			t.Fatalf("answers alone went as a batch of their own: %+v", b)
		}
		held = true
	}
	if !held {
		t.Fatalf("in 20 tries, never looked before maxLinger (%v) was over: the machine is too loaded for this test", maxLinger)
	}
	px.Observe([]core.FlowEvent{point}, nil)
	waitFor(t, "the point's batch", 10*time.Second, func() bool { return len(l.sent()) > 0 })
	if b := l.sent(); len(b) != 1 || len(b[0]) != 2 || b[0][0] != answer || b[0][1] != point {
		t.Fatalf("batches %+v, want one: the answer, then the point", b)
	}

	// With no event after them, answers still go, after maxLinger.
	start := time.Now()
	px.Observe([]core.FlowEvent{answer}, nil)
	waitFor(t, "the lone answer", 10*time.Second, func() bool { return len(l.sent()) > 1 })
	if b := l.sent(); len(b) != 2 || len(b[1]) != 1 || b[1][0] != answer {
		t.Fatalf("batches %+v, want the lone answer second", b)
	}
	if d := time.Since(start); d < maxLinger {
		t.Fatalf("the lone answer went after %v, before maxLinger (%v)", d, maxLinger)
	}
}
