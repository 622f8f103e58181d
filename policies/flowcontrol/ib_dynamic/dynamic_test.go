package ibdynamic

import (
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

func setup(t *testing.T, p *Policy) {
	t.Helper()
	if p.Step == 0 {
		p.Step = 1
	}
	if p.Threshold == 0 {
		p.Threshold = 5
	}
	s, err := p.Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 4, Senders: 3, BufferSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if s.Scheme != core.FlowCredits || s.Quota != p.Initial || s.MaxQuota != p.Max || s.RNRRetry != 7 {
		t.Fatalf("setup %+v", s)
	}
}

func backlogged(peer, posted int) core.FlowEvent {
	return core.FlowEvent{Kind: core.FlowBacklogged, Peer: int32(peer), Quota: int32(posted), Value: 1}
}

func TestEachBackloggedFrameGrowsItsSenderLinearlyUpToMax(t *testing.T) {
	p := &Policy{Initial: 1, Max: 4, Step: 1}
	setup(t, p)
	// Three backlogged frames from rank 2 in one batch: one proposal, +3.
	d := p.Observe([]core.FlowEvent{backlogged(2, 1), backlogged(2, 1), backlogged(2, 1)}, nil)
	if len(d) != 1 || d[0] != (core.FlowDecision{Kind: core.FlowSetQuota, Peer: 2, Value: 4}) {
		t.Fatalf("decisions %+v, want rank 2 to 4", d)
	}
	// At max: nothing more to ask.
	if d := p.Observe([]core.FlowEvent{backlogged(2, 4)}, nil); len(d) != 0 {
		t.Fatalf("decisions at max %+v", d)
	}
	if p.Target(1) != 1 || p.Target(2) != 4 {
		t.Fatalf("targets %d %d", p.Target(1), p.Target(2))
	}
}

func TestExponentialGrowthDoublesFromWhatIsPosted(t *testing.T) {
	p := &Policy{Initial: 2, Max: 100, Exponential: true}
	setup(t, p)
	got := []int64{}
	for range 7 {
		d := p.Observe([]core.FlowEvent{backlogged(0, p.Target(0))}, nil)
		if len(d) == 0 {
			break
		}
		got = append(got, d[0].Value)
	}
	want := []int64{4, 8, 16, 32, 64, 100}
	if len(got) != len(want) {
		t.Fatalf("growth %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("growth %v, want %v", got, want)
		}
	}
}

func TestAQuietPeerIsHalvedNeverBelowInitialAndOnlyWhenAsked(t *testing.T) {
	p := &Policy{Initial: 3, Max: 64}
	setup(t, p)
	p.Observe([]core.FlowEvent{{Kind: core.FlowQuota, Peer: 1, Quota: 40}}, nil)
	idle := func(d time.Duration) []core.FlowDecision {
		return p.Observe([]core.FlowEvent{{Kind: core.FlowIdle, Peer: 1, Quota: int32(p.Target(1)), Value: int64(d)}}, nil)
	}
	if d := idle(time.Hour); len(d) != 0 {
		t.Fatalf("shrink_after 0 shrank: %+v", d)
	}
	p.ShrinkAfter = 10 * time.Millisecond
	if d := idle(8 * time.Millisecond); len(d) != 0 {
		t.Fatalf("shrank before shrink_after: %+v", d)
	}
	var got []int64
	for _, q := range []time.Duration{16, 32, 64, 128, 256} {
		for _, d := range idle(q * time.Millisecond) {
			got = append(got, d.Value)
		}
	}
	want := []int64{20, 10, 5, 3}
	if len(got) != len(want) || got[0] != 20 || got[1] != 10 || got[2] != 5 || got[3] != 3 {
		t.Fatalf("shrinking %v, want %v", got, want)
	}
	// Growth starts again from the smaller number.
	if d := p.Observe([]core.FlowEvent{backlogged(1, 3)}, nil); len(d) != 1 || d[0].Value != 4 {
		t.Fatalf("growth after shrinking %+v", d)
	}
}

func TestEventsAboutUnknownPeersAreIgnoredAndObserveDoesNotAllocate(t *testing.T) {
	p := &Policy{Initial: 1, Max: 8}
	setup(t, p)
	ev := []core.FlowEvent{backlogged(-1, 1), backlogged(99, 1), backlogged(3, 1)}
	out := make([]core.FlowDecision, 0, 4)
	if d := p.Observe(ev, out); len(d) != 1 || d[0].Peer != 3 {
		t.Fatalf("decisions %+v", d)
	}
	ev = []core.FlowEvent{backlogged(1, 1), backlogged(2, 1)}
	if a := testing.AllocsPerRun(100, func() {
		p.target[1], p.target[2] = 0, 0
		out = p.Observe(ev, out[:0])
	}); a != 0 {
		t.Fatalf("Observe allocates %v times", a)
	}
}

func TestSetupChecksItsNumbers(t *testing.T) {
	for _, p := range []Policy{
		{Initial: 0, Max: 4, Step: 1, Threshold: 5},
		{Initial: 5, Max: 4, Step: 1, Threshold: 5},
		{Initial: 1, Max: 4, Step: 0, Threshold: 5},
		{Initial: 1, Max: 4, Step: 1, Threshold: 5, ShrinkAfter: -1},
	} {
		if _, err := p.Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 2, Senders: 1}); err == nil {
			t.Errorf("accepted %+v", p)
		}
	}
}
