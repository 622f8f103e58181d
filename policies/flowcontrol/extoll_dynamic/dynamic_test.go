package extolldynamic

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/gobtl/gobtl/core"
)

func setup(t *testing.T, n, perPeer, k int) *Policy {
	t.Helper()
	p := &Policy{CreditSlots: k}
	s, err := p.Setup(core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: n, Senders: n, BufferSize: 64, Buffers: n * perPeer})
	if err != nil {
		t.Fatal(err)
	}
	if !s.DynamicRegion || s.CreditSlots != k || s.Scheme != core.FlowCredits {
		t.Fatalf("setup %+v", s)
	}
	return p
}

func monitor(p *Policy, s int) []core.FlowDecision {
	return p.Observe([]core.FlowEvent{{Kind: core.FlowMonitor, Peer: int32(s), Quota: int32(p.intended[s])}}, nil)
}

// §6.3: all senders start in the low list in rank order with equal quota.
func TestSetupPutsEverySenderInTheLowList(t *testing.T) {
	p := setup(t, 4, 30, 2)
	if got := p.Members(Low); !reflect.DeepEqual(got, []int{0, 1, 2, 3}) {
		t.Fatalf("low list %v", got)
	}
	for s := range 4 {
		if p.Intended(s) != 28 {
			t.Fatalf("sender %d quota %d, want (120-8)/4 = 28", s, p.Intended(s))
		}
	}
}

// Figure 12: a monitored sender climbs one list per monitoring point; from
// the top it steals from the oldest low-activity sender by Equation 6.
func TestMonitoringPointsPromoteThenSteal(t *testing.T) {
	p := setup(t, 4, 30, 2)
	if d := monitor(p, 1); len(d) != 0 || p.Role(1) != Medium {
		t.Fatalf("first point: decisions %v, role %d", d, p.Role(1))
	}
	if d := monitor(p, 1); len(d) != 0 || p.Role(1) != High {
		t.Fatalf("second point: decisions %v, role %d", d, p.Role(1))
	}
	// Third point: sender 1 is high; the oldest low sender is 3 (the back).
	// Equal quotas: cred = max(k+1, 0) = 3.
	d := monitor(p, 1)
	want := []core.FlowDecision{
		{Kind: core.FlowSetQuota, Peer: 3, Value: 25},
		{Kind: core.FlowSetQuota, Peer: 1, Value: 31},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("steal %v, want %v", d, want)
	}
	if p.Role(3) != Medium {
		t.Fatalf("victim in list %d, want medium", p.Role(3))
	}
	// Next steal takes from sender 2 (3 went to medium), with a gap of 31
	// vs 28: still max(3, 1) = 3.
	d = monitor(p, 1)
	if d[0].Peer != 2 || d[0].Value != 25 || d[1].Value != 34 {
		t.Fatalf("second steal %v", d)
	}
	// Equation 6 grows with the gap: 34 vs 28 -> 3; after more steals the
	// gap halves across.
	for s, q := range []int{28, 60, 12, 12} {
		p.set(s, q)
	}
	d = monitor(p, 1)
	if d[0].Peer != 0 || d[0].Value != 28-16 || d[1].Value != 60+16 {
		t.Fatalf("steal by Equation 6 from a gap of 32: %v", d)
	}
}

// Figure 13: a victim is never taken below its static slots; reduced to
// them it goes to the null list and a compulsory return is proposed.
func TestVictimKeepsItsStaticSlotsAndIsReclaimed(t *testing.T) {
	p := setup(t, 2, 12, 2) // data 20, quota 10, static 2
	monitor(p, 0)
	monitor(p, 0) // 0 is high
	var last []core.FlowDecision
	for range 10 {
		last = monitor(p, 0)
		if p.Intended(1) < 2 {
			t.Fatalf("victim's quota %d below its static slots", p.Intended(1))
		}
		if p.Role(1) == Null {
			break
		}
	}
	if p.Role(1) != Null || p.Intended(1) != 2 || p.Intended(0) != 18 {
		t.Fatalf("victim role %d quota %d, thief quota %d", p.Role(1), p.Intended(1), p.Intended(0))
	}
	if n := len(last); n == 0 || last[n-1].Kind != core.FlowReclaim || last[n-1].Peer != 1 {
		t.Fatalf("no compulsory return proposed: %v", last)
	}
	// A null sender that becomes active again is treated as high: it goes
	// to the top at once (the lists shift, 0 drops to medium) and at its
	// next point, with 0 shifted to low, it steals back.
	if d := monitor(p, 1); p.Role(1) != High || p.Role(0) != Medium || len(d) != 0 {
		t.Fatalf("returning sender: role %d, thief role %d, decisions %v", p.Role(1), p.Role(0), d)
	}
	d := monitor(p, 1)
	if p.Role(1) != High || len(d) != 2 || d[1].Peer != 1 {
		t.Fatalf("returning sender: role %d decisions %v", p.Role(1), d)
	}
}

// With an empty low list the lists shift down a level before the monitored
// sender moves to the new high list.
func TestListsShiftWhenTheLowListEmpties(t *testing.T) {
	p := setup(t, 2, 30, 2)
	monitor(p, 0)
	monitor(p, 1) // both medium
	monitor(p, 0) // 0 high, 1 medium, low empty
	monitor(p, 0) // shift: 1 becomes low; 0 to the new high; steal from 1
	if p.Role(0) != High || (p.Role(1) != Medium && p.Role(1) != Null) {
		t.Fatalf("roles after shift: 0 %d, 1 %d", p.Role(0), p.Role(1))
	}
	if p.Steals != 1 {
		t.Fatalf("%d steals after the shift, want 1", p.Steals)
	}
}

func TestQuotaEventsResyncThePolicy(t *testing.T) {
	p := setup(t, 2, 30, 2)
	p.Observe([]core.FlowEvent{{Kind: core.FlowQuota, Peer: 1, Quota: 7}}, nil)
	if p.Intended(1) != 7 {
		t.Fatalf("quota %d after a FlowQuota of 7", p.Intended(1))
	}
}

func TestSetupRejectsOtherTransportsAndEquation2Violations(t *testing.T) {
	p := &Policy{CreditSlots: 2}
	if _, err := p.Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 3, Senders: 2, Buffers: 100}); err == nil {
		t.Fatal("accepted the ib transport")
	}
	if _, err := p.Setup(core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: 4, Senders: 4, Buffers: 15}); err == nil {
		t.Fatal("accepted a mailbox smaller than Equation 2 allows")
	}
}

// The activity lists stay consistent both ways under any sequence of
// moves: each list read from the back is its reverse from the front, and
// matches a plain slice model of the same moves.
func TestListsMatchASliceModelBothWays(t *testing.T) {
	const n = 7
	p := setup(t, n, 30, 2)
	model := [lists][]int{}
	for s := range n {
		model[p.list(Low)] = append(model[p.list(Low)], s)
	}
	rng := uint32(1)
	for step := range 500 {
		rng = rng*1664525 + 1013904223
		l, s := int(rng>>8)%lists, int(rng>>16)%n
		p.moveFront(l, s)
		for k := range model {
			model[k] = slices.DeleteFunc(model[k], func(x int) bool { return x == s })
		}
		model[l] = append([]int{s}, model[l]...)
		for k := range lists {
			var fwd, rev []int
			for i := p.ends[front][k]; i >= 0; i = p.link[back][i] {
				fwd = append(fwd, int(i))
			}
			for i := p.ends[back][k]; i >= 0; i = p.link[front][i] {
				rev = append([]int{int(i)}, rev...)
			}
			if !slices.Equal(fwd, model[k]) || !slices.Equal(rev, model[k]) {
				t.Fatalf("step %d (sender %d to list %d): list %d is %v forwards, %v backwards, want %v", step, s, l, k, fwd, rev, model[k])
			}
		}
	}
}

// lagged models the VELO engine under a plugin policy: it applies each
// batch of decisions lag batches after it was proposed, in order, answers
// every FlowSetQuota with a FlowQuota, and raises monitoring points with
// the quotas it holds at the time — which predate the decisions still in
// flight. It applies proposals as made, unclamped, so that a policy that
// over-promises the data region shows.
type lagged struct {
	t              *testing.T
	p              *Policy
	quota          []int
	data, static   int
	inflight       [][]core.FlowDecision
	events         []core.FlowEvent
	steps, applied int
	last           []core.FlowDecision // the policy's answer to the last step
}

func newLagged(t *testing.T, n, perPeer, k int) *lagged {
	p := setup(t, n, perPeer, k)
	e := &lagged{t: t, p: p, quota: make([]int, n), data: n*perPeer - n*k, static: k}
	for s := range n {
		e.quota[s] = p.Intended(s)
	}
	return e
}

func (e *lagged) apply(ds []core.FlowDecision) {
	e.t.Helper()
	for _, d := range ds {
		if d.Kind != core.FlowSetQuota {
			continue
		}
		e.applied++
		if d.Value < int64(e.static) || d.Value > int64(e.data) {
			e.t.Fatalf("step %d: SetQuota %d for sender %d outside [%d, %d]", e.steps, d.Value, d.Peer, e.static, e.data)
		}
		e.quota[d.Peer] = int(d.Value)
		if sum := e.sum(); sum > e.data {
			e.t.Fatalf("step %d: quotas %v promise %d slots of a %d-slot data region", e.steps, e.quota, sum, e.data)
		}
		e.events = append(e.events, core.FlowEvent{Kind: core.FlowQuota, Peer: d.Peer, Quota: int32(d.Value)})
	}
}

func (e *lagged) sum() int {
	n := 0
	for _, q := range e.quota {
		n += q
	}
	return n
}

// step raises a monitoring point for each of monitored, hands the batch to
// the policy and applies what is lag batches old.
func (e *lagged) step(lag int, monitored ...int) {
	e.t.Helper()
	e.steps++
	for _, s := range monitored {
		e.events = append(e.events, core.FlowEvent{Kind: core.FlowMonitor, Peer: int32(s), Quota: int32(e.quota[s])})
	}
	out := e.p.Observe(e.events, nil)
	e.events = e.events[:0]
	e.last = out
	e.inflight = append(e.inflight, out)
	for len(e.inflight) > lag {
		e.apply(e.inflight[0])
		e.inflight = e.inflight[1:]
	}
}

// run moves the activity between random sets of at most maxBusy senders,
// phases times, for minSteps to minSteps+59 steps each; at each step
// each busy sender reaches a point with probability 1/every, and the
// decisions are up to maxLag-1 steps late. after, if set, runs after
// every step.
func (e *lagged) run(rng *rand.Rand, phases, maxBusy, minSteps, every, maxLag int, after func()) {
	e.t.Helper()
	n := len(e.quota)
	for range phases {
		busy := rng.Perm(n)[:1+rng.IntN(maxBusy)]
		for range minSteps + rng.IntN(60) {
			var mon []int
			for _, s := range busy {
				if rng.IntN(every) == 0 {
					mon = append(mon, s)
				}
			}
			e.step(rng.IntN(maxLag), mon...)
			if after != nil {
				after()
			}
		}
	}
}

// settle applies everything in flight and delivers the answers; the policy
// must then agree with the engine.
func (e *lagged) settle() {
	e.t.Helper()
	for len(e.inflight) > 0 || len(e.events) > 0 {
		e.step(0)
	}
	for s, q := range e.quota {
		if e.p.Intended(s) != q {
			e.t.Fatalf("settled: sender %d holds %d, the policy's copy says %d", s, q, e.p.Intended(s))
		}
	}
}

// A plugin's decisions reach the engine a round trip after the events they
// answer, so monitoring points meanwhile carry the quota from before a
// steal (seed 003 §6.4: each is a point of the sender's own history). The
// old policy took that quota as its copy; each steal then started from the
// old quota, the victim lost slots every time and the thief gained them
// once: on two ranks the busy sender peaked at 68 of 110 slots. Here the
// busy sender must end with the whole data region but the victim's static
// slots (§6.2: the intended quotas add up to the data region), as it does
// built in.
func TestStaleMonitoringPointsLoseNoSlots(t *testing.T) {
	for _, lag := range []int{0, 1, 3} {
		e := newLagged(t, 2, 58, 2)
		for range 60 {
			e.step(lag, 0)
		}
		e.settle()
		if e.quota[0] != e.data-e.static || e.quota[1] != e.static {
			t.Fatalf("lag %d: quotas %v after 60 monitoring points of sender 0, want [%d %d]: %d slots assigned to nobody",
				lag, e.quota, e.data-e.static, e.static, e.data-e.sum())
		}
	}
}

// With decisions in flight, the events of a busy phase describe states the
// engine has left: answers to proposals that later ones overrode, monitor
// points from before a cut. Whatever their mix, every quota the engine
// holds, at every decision applied in order, stays within [static, data
// region] and all of them within the data region; once everything is
// applied and answered the policy agrees with the engine and no slot is
// lost. Phases move the activity between senders, so victims become
// thieves with cuts still in flight.
func TestDecisionsInFlightNeverOverPromiseThePool(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		n := 2 + rng.IntN(7)
		e := newLagged(t, n, 16+rng.IntN(48), 1+rng.IntN(3))
		e.run(rng, 6, n, 20, 3, 5, nil)
		e.settle()
		if e.sum() != e.data {
			t.Fatalf("seed %d: %d of %d data slots assigned after %d decisions", seed, e.sum(), e.data, e.applied)
		}
		if e.applied == 0 {
			t.Fatalf("seed %d: no decision", seed)
		}
	}
}

// The engine clamps a raise it has no unassigned slots for and answers
// with the quota it set; the slots the policy meant for the thief are then
// nobody's, and the next thief gets them.
func TestSlotsAClampLeftUnassignedGoToTheNextThief(t *testing.T) {
	p := setup(t, 2, 58, 2) // data 112, quota 56
	monitor(p, 0)
	monitor(p, 0)
	d := monitor(p, 0) // equal quotas: cred = k+1 = 3
	if len(d) != 2 || d[0].Value != 53 || d[1].Value != 59 {
		t.Fatalf("steal %v", d)
	}
	p.Observe([]core.FlowEvent{{Kind: core.FlowQuota, Peer: 1, Quota: 53}, {Kind: core.FlowQuota, Peer: 0, Quota: 57}}, nil)
	// 57 vs 53: cred = max(3, 2) = 3, plus the 2 the clamp left over.
	d = monitor(p, 0)
	want := []core.FlowDecision{{Kind: core.FlowSetQuota, Peer: 1, Value: 50}, {Kind: core.FlowSetQuota, Peer: 0, Value: 62}}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("steal after a clamp %v, want %v", d, want)
	}
}

// A fallback policy starts from equal shares while the engine its plugin
// left behind holds other quotas; resyncing from the engine's events its
// copy may count more than the data region until every sender has been
// heard of. Meanwhile a thief is raised by less than the victim gives, so
// no proposal promises a slot twice.
func TestACopyCountingTooMuchRaisesTheThiefByLess(t *testing.T) {
	p := setup(t, 2, 58, 2) // data 112, quota 56
	// The plugin's engine left sender 0 with 110 and sender 1 with 2; the
	// fallback hears of sender 0 first.
	p.Observe([]core.FlowEvent{{Kind: core.FlowQuota, Peer: 0, Quota: 110}}, nil)
	for range 6 {
		for _, d := range p.Observe([]core.FlowEvent{{Kind: core.FlowMonitor, Peer: 0, Quota: 110}}, nil) {
			if d.Kind == core.FlowSetQuota && d.Peer == 0 && d.Value > 110 {
				t.Fatalf("sender 0 raised to %d: with sender 1's 2 slots, over the 112-slot data region", d.Value)
			}
		}
	}
	if p.Intended(0) != 110 || p.Intended(1) != 2 {
		t.Fatalf("copy %d/%d, want 110/2", p.Intended(0), p.Intended(1))
	}
}

// state is a policy's logical state: who is in which role in which order,
// the quota copies and the counts. Which physical list plays which role is
// left out — a shift of empty lists changes it and nothing else.
type state struct {
	members                 [lists][]int
	intended                []int
	unanswered              []int32
	sum                     int
	steals, stolen, reclaim int
}

func stateOf(p *Policy) state {
	s := state{intended: slices.Clone(p.intended), unanswered: slices.Clone(p.unanswered), sum: p.sum,
		steals: p.Steals, stolen: p.Stolen, reclaim: p.Reclaims}
	for r := range lists {
		s.members[r] = p.Members(r)
	}
	return s
}

func clonePolicy(p *Policy) *Policy {
	q := *p
	q.intended, q.unanswered, q.in = slices.Clone(p.intended), slices.Clone(p.unanswered), slices.Clone(p.in)
	q.link = [2][]int32{slices.Clone(p.link[0]), slices.Clone(p.link[1])}
	return &q
}

// A FlowQuiet is a promise a plugin host acts on by not sending the
// monitoring points it names (core.FlowQuiet): each one stated in random
// streams, with decisions in flight, is checked on a copy of the policy —
// its monitoring points, any number of them, must propose nothing and
// leave the logical state as it was. And two ranks, where one sender is
// busy, must come to state it, or hosts would send every point forever.
func TestAQuietMonitoringPointChangesNothing(t *testing.T) {
	stated := 0
	check := func(seed uint64, e *lagged) {
		t.Helper()
		var quiet []core.FlowEvent
		for _, d := range e.last {
			if d.Kind == core.FlowQuiet {
				quiet = append(quiet, core.FlowEvent{Kind: core.FlowMonitor, Peer: d.Peer, Quota: int32(d.Value), Value: int64(stated % 7)})
			}
		}
		if len(quiet) == 0 {
			return
		}
		stated++
		q := clonePolicy(e.p)
		before := stateOf(q)
		for range 3 {
			for _, ev := range quiet {
				for _, d := range q.Observe([]core.FlowEvent{ev}, nil) {
					if d.Kind != core.FlowQuiet {
						t.Fatalf("seed %d step %d: quiet point %+v proposed %+v", seed, e.steps, ev, d)
					}
				}
			}
		}
		if after := stateOf(q); !reflect.DeepEqual(before, after) {
			t.Fatalf("seed %d step %d: quiet points %v changed the state\n%+v\n%+v", seed, e.steps, quiet, before, after)
		}
	}
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 5))
		n := 2 + rng.IntN(5)
		e := newLagged(t, n, 16+rng.IntN(48), 1+rng.IntN(3))
		e.run(rng, 8, min(n, 2), 10, 2, 3, func() { check(seed, e) })
	}
	e := newLagged(t, 2, 58, 2)
	before := stated
	for range 40 {
		e.step(1, 0)
		check(0, e)
	}
	if stated == before || e.last[len(e.last)-1] != (core.FlowDecision{Kind: core.FlowQuiet, Peer: 0, Value: int64(e.data - e.static)}) {
		t.Fatalf("two ranks, sender 0 busy: last answer %v, want a FlowQuiet for sender 0 at %d slots", e.last, e.data-e.static)
	}
	t.Logf("%d quiet statements checked", stated)
}
