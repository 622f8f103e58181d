package extolldynamic

import (
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
	p.intended[0] = 28
	p.intended[1] = 60
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
