package policy

import (
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// echo proposes one decision per event, carrying the event, and records
// the batches it was given.
type echo struct{ batches [][]int }

func (p *echo) Observe(events []int, out []int) []int {
	p.batches = append(p.batches, append([]int(nil), events...))
	return append(out, events...)
}

// mech is a mechanism whose Apply keeps values, clamps those above 100 and
// rejects negative ones.
type mech struct {
	d       Driver[int, int]
	applied []int
	raise   bool // report each clamp back as an event
}

func (m *mech) apply(v int) Verdict {
	switch {
	case v < 0:
		return Rejected
	case v > 100:
		m.applied = append(m.applied, 100)
		if m.raise {
			m.d.Event(-v)
		}
		return Clamped
	}
	m.applied = append(m.applied, v)
	return Applied
}

func newMech(pol Observer[int, int], batch int, clock core.Clock) (*mech, *core.Counter, *core.Counter) {
	m := &mech{}
	var clamped, rejected core.Counter
	m.d.Init(Config[int, int]{Policy: pol, Apply: Each(m.apply), Batch: batch, Clock: clock, Clamped: &clamped, Rejected: &rejected})
	return m, &clamped, &rejected
}

func TestEventsWaitForTheFlush(t *testing.T) {
	p := &echo{}
	m, _, _ := newMech(p, 0, &core.ManualClock{})
	m.d.Event(1)
	m.d.Event(2)
	if len(p.batches) != 0 || m.d.Pending() != 2 {
		t.Fatalf("the policy was called before the flush: %v, %d pending", p.batches, m.d.Pending())
	}
	m.d.Flush()
	if len(p.batches) != 1 || len(p.batches[0]) != 2 || m.d.Pending() != 0 {
		t.Fatalf("after the flush the policy saw %v, %d pending", p.batches, m.d.Pending())
	}
	m.d.Flush()
	if len(p.batches) != 1 {
		t.Fatalf("a flush with no events called the policy: %v", p.batches)
	}
}

func TestAFullBatchGoesAtOnce(t *testing.T) {
	p := &echo{}
	m, _, _ := newMech(p, 3, &core.ManualClock{})
	for v := range 7 {
		m.d.Event(v)
	}
	if len(p.batches) != 2 || len(p.batches[0]) != 3 || len(p.batches[1]) != 3 || m.d.Pending() != 1 {
		t.Fatalf("batches %v, %d pending; want two of three and one waiting", p.batches, m.d.Pending())
	}
}

func TestTickPollsOncePerInterval(t *testing.T) {
	p := &echo{}
	clock := &core.ManualClock{}
	m, _, _ := newMech(p, 0, clock)
	m.d.Tick(clock.Now())
	if len(p.batches) != 0 {
		t.Fatalf("tick before the interval called the policy")
	}
	clock.Advance(core.PolicyPollInterval)
	m.d.Tick(clock.Now())
	m.d.Tick(clock.Now())
	if len(p.batches) != 1 || len(p.batches[0]) != 0 {
		t.Fatalf("after one interval the policy saw %v, want one empty batch", p.batches)
	}
	m.d.Event(5)
	m.d.Tick(clock.Now())
	if len(p.batches) != 2 {
		t.Fatalf("a tick with events waiting did not hand them over: %v", p.batches)
	}
	clock.Advance(core.PolicyPollInterval / 2)
	m.d.Tick(clock.Now())
	if len(p.batches) != 2 {
		t.Fatalf("the interval runs from the last call, not the last tick: %v", p.batches)
	}
}

func TestVerdictsAreCounted(t *testing.T) {
	m, clamped, rejected := newMech(&echo{}, 0, &core.ManualClock{})
	for _, v := range []int{1, -1, 200, 50, -3, 300} {
		m.d.Event(v)
	}
	m.d.Flush()
	if clamped.Load() != 2 || rejected.Load() != 2 {
		t.Fatalf("clamped %d, rejected %d; want 2 and 2", clamped.Load(), rejected.Load())
	}
	if want := []int{1, 100, 50, 100}; len(m.applied) != len(want) {
		t.Fatalf("applied %v, want %v", m.applied, want)
	}
}

func TestARunStandsOrFallsTogether(t *testing.T) {
	// Positive decisions form runs, and so do the others; a run with a
	// zero in it is rejected whole.
	var applied [][]int
	var rejected core.Counter
	var d Driver[int, int]
	d.Init(Config[int, int]{Policy: &echo{}, Clock: &core.ManualClock{}, Rejected: &rejected,
		Apply: func(ds []int) (int, Verdict) {
			n := 1
			for n < len(ds) && (ds[n] > 0) == (ds[0] > 0) {
				n++
			}
			for _, v := range ds[:n] {
				if v == 0 {
					return n, Rejected
				}
			}
			applied = append(applied, ds[:n])
			return n, Applied
		}})
	for _, v := range []int{1, 2, -1, 0, -2, 3} {
		d.Event(v)
	}
	d.Flush()
	if rejected.Load() != 3 || len(applied) != 2 {
		t.Fatalf("rejected %d decisions, applied runs %v; want the run {-1, 0, -2} rejected and two runs applied", rejected.Load(), applied)
	}
}

func TestEventsRaisedWhileApplyingGoToTheNextBatch(t *testing.T) {
	p := &echo{}
	m, _, _ := newMech(p, 1, &core.ManualClock{})
	m.raise = true
	m.d.Event(500) // batch of one: observed at once, its clamp raises -500
	if len(p.batches) != 1 || m.d.Pending() != 1 {
		t.Fatalf("batches %v, %d pending; the raised event must wait for the next batch", p.batches, m.d.Pending())
	}
	m.d.Flush()
	if len(p.batches) != 2 || p.batches[1][0] != -500 {
		t.Fatalf("batches %v; want the raised event in the second", p.batches)
	}
}

func TestWithoutAPolicyNothingHappens(t *testing.T) {
	var d Driver[int, int]
	d.Init(Config[int, int]{Apply: func([]int) (int, Verdict) { panic("applied without a policy") }})
	d.Event(1)
	d.Flush()
	d.Tick(time.Hour)
	if d.Active() || d.Pending() != 0 {
		t.Fatalf("a driver without a policy kept events")
	}
}

// sum is a policy that allocates nothing: one decision per batch.
type sum struct{}

func (sum) Observe(events []int, out []int) []int {
	s := 0
	for _, v := range events {
		s += v
	}
	return append(out, s)
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	clock := &core.ManualClock{}
	m, _, _ := newMech(sum{}, 64, clock)
	m.applied = make([]int, 0, 1)
	allocs := testing.AllocsPerRun(1000, func() {
		for v := range 100 {
			m.d.Event(v)
		}
		m.d.Flush()
		clock.Advance(core.PolicyPollInterval)
		m.d.Tick(clock.Now())
		m.applied = m.applied[:0]
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch cycle, want 0", allocs)
	}
}
