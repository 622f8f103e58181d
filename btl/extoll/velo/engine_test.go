package velo

import (
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
	extolldynamic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
)

// The two formulas seed 003 §5.2 rejects.
func formulaA(q, k int) int { return q/k + 1 }
func formulaB(q, k int) int { return q / k }

// Table 1 of seed 003, reproduced by the threshold code.
func TestThresholdReproducesTable1(t *testing.T) {
	table := []struct{ quota, slots, eq1, a, b int }{
		{100, 1, 51, 101, 100},
		{100, 2, 34, 51, 50},
		{100, 3, 26, 34, 33},
		{100, 4, 21, 26, 25},
		{100, 5, 17, 21, 20},
		{60, 2, 21, 31, 30},
		{40, 2, 14, 21, 20},
		{20, 2, 7, 11, 10},
		{10, 2, 4, 6, 5},
		{3, 2, 2, 2, 1},
	}
	for _, r := range table {
		if got := Threshold(r.quota, r.slots); got != r.eq1 {
			t.Errorf("Equation 1 (%d, %d) = %d, Table 1 says %d", r.quota, r.slots, got, r.eq1)
		}
		if got := formulaA(r.quota, r.slots); got != r.a {
			t.Errorf("formula (a) (%d, %d) = %d, Table 1 says %d", r.quota, r.slots, got, r.a)
		}
		if got := formulaB(r.quota, r.slots); got != r.b {
			t.Errorf("formula (b) (%d, %d) = %d, Table 1 says %d", r.quota, r.slots, got, r.b)
		}
	}
}

// mailboxFor is the mailbox that gives each of n senders quota data slots
// and k credit slots.
func mailboxFor(n, quota, k int) int { return n * (quota + k) }

// Formula (a) with quota 100 and one credit slot sets the threshold to 101:
// the receiver waits for a 101st packet the sender has no credit to send.
func TestFormulaADeadlocksUnlessTheMechanismClampsIt(t *testing.T) {
	for _, checked := range []bool{false, true} {
		c, err := newCluster(clusterOpts{n: 2, slots: mailboxFor(2, 100, 1), scheme: schemeStatic, creditSlots: 1,
			threshold: formulaA, unchecked: !checked, backlog: 1024})
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			if ok, err := c.send(0, 1, 30, 56); !ok || err != nil {
				t.Fatalf("send refused: %v", err)
			}
		}
		err = c.drain(10000)
		switch {
		case !checked && (err == nil || !strings.Contains(err.Error(), "deadlock")):
			t.Fatalf("formula (a) without the check: want a deadlock, got %v", err)
		case checked && err != nil:
			t.Fatalf("formula (a) clamped by the mechanism: %v", err)
		}
	}
}

// Formula (b) with quota 3 and two credit slots sets the threshold to 1: a
// sender that sends its three packets and does not look at its mailbox gets
// three credit packets for two credit slots.
func TestFormulaBOverflowsTheCreditRegionUnlessGuarded(t *testing.T) {
	for _, checked := range []bool{false, true} {
		c, err := newCluster(clusterOpts{n: 2, slots: mailboxFor(2, 3, 2), scheme: schemeStatic, creditSlots: 2,
			threshold: formulaB, unchecked: !checked})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.send(0, 1, 3, 56); !ok || err != nil {
			t.Fatalf("send refused: %v", err)
		}
		c.f.deliverAll()
		c.poll(1, 100) // rank 0 does not poll: three thresholds reached
		c.f.deliverAll()
		overflow := len(c.f.overflows) > 0
		if overflow == checked {
			t.Fatalf("checked=%v: overflows %v", checked, c.f.overflows)
		}
		if checked {
			if c.counter(1, "credit_packets_deferred") == 0 {
				t.Fatal("the guard never held a credit packet back")
			}
			for range 5 {
				c.send(0, 1, 3, 56)
			}
			if err := c.drain(1000); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// With Equation 1 the same schedule never reaches the threshold a third
// time, and the guard has nothing to do.
func TestEquation1NeedsNoGuard(t *testing.T) {
	c, err := newCluster(clusterOpts{n: 3, slots: mailboxFor(3, 20, 2), scheme: schemeStatic, creditSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		c.send(i%3, (i+1)%3, 1+i%37, 8+i%49)
		c.f.deliverAll()
		c.poll((i+1)%3, 1+i%7)
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.drain(100000); err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if n := c.counter(r, "credit_packets_deferred"); n != 0 {
			t.Fatalf("rank %d: the guard held %d credit packets back under Equation 1", r, n)
		}
		if n := c.counter(r, "threshold_clamps"); n != 0 {
			t.Fatalf("rank %d: %d thresholds clamped under Equation 1", r, n)
		}
	}
}

// Figure 3: quota 20, two credit slots, threshold 7.
func TestStaticSchemeFollowsFigure3(t *testing.T) {
	c, err := newCluster(clusterOpts{n: 2, slots: mailboxFor(2, 20, 2), scheme: schemeStatic, creditSlots: 2, backlog: 64})
	if err != nil {
		t.Fatal(err)
	}
	e0, e1 := c.eng[0], c.eng[1]
	if th := creditsOf(e1).region.(*staticRegion).t; th != 7 || e0.Credits(1) != 20 {
		t.Fatalf("threshold %d, credits %d; want 7 and 20", th, e0.Credits(1))
	}
	// Point 1: a message longer than the quota fills the data region.
	c.send(0, 1, 30, 56)
	if e0.Credits(1) != 0 || e0.Backlog(1) != 10 {
		t.Fatalf("after sending: credits %d backlog %d", e0.Credits(1), e0.Backlog(1))
	}
	c.f.deliverAll()
	// Points 3–5: the receiver frees 20 slots, returning 7 twice; six more
	// freed slots do not reach the threshold.
	c.poll(1, 20)
	if got := c.counter(1, "credit_packets"); got != 2 {
		t.Fatalf("%d credit packets after 20 retrievals, want 2", got)
	}
	c.f.deliverAll()
	// Point 6: the sender reads a credit packet and resumes.
	c.poll(0, 1)
	if e0.Credits(1) != 0 || e0.Backlog(1) != 3 {
		t.Fatalf("after one credit packet: credits %d backlog %d", e0.Credits(1), e0.Backlog(1))
	}
	if err := c.drain(100); err != nil {
		t.Fatal(err)
	}
}

func TestPiggybackedCreditsRideTheLastPacket(t *testing.T) {
	c, err := newCluster(clusterOpts{n: 2, slots: mailboxFor(2, 20, 2), scheme: schemeStatic, creditSlots: 2, piggyback: true})
	if err != nil {
		t.Fatal(err)
	}
	// A symmetric exchange of messages whose last packet has room.
	for range 50 {
		c.send(0, 1, 3, 44)
		c.send(1, 0, 3, 44)
		c.f.deliverAll()
		c.poll(0, 100)
		c.poll(1, 100)
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.drain(100); err != nil {
		t.Fatal(err)
	}
	if c.counter(0, "piggybacked_credits") == 0 || c.counter(1, "piggybacked_credits") == 0 {
		t.Fatal("no credits piggybacked")
	}
	// Full last packets leave no room: only explicit credit packets.
	d, _ := newCluster(clusterOpts{n: 2, slots: mailboxFor(2, 20, 2), scheme: schemeStatic, creditSlots: 2, piggyback: true})
	for range 50 {
		d.send(0, 1, 3, 56)
		d.send(1, 0, 3, 56)
		d.f.deliverAll()
		d.poll(0, 100)
		d.poll(1, 100)
	}
	if err := d.drain(100); err != nil {
		t.Fatal(err)
	}
	if d.counter(0, "piggybacked_credits") != 0 || d.counter(0, "credit_packets") == 0 {
		t.Fatal("credits piggybacked on full packets")
	}
}

// One busy sender among idle ones: at its monitoring points the dynamic
// scheme steals the idle senders' quota for it, and the busy sender ends
// up holding far more than a static share.
func TestDynamicSchemeMovesQuotaToTheBusySender(t *testing.T) {
	const n, perPeer = 8, 10
	c, err := newCluster(clusterOpts{n: n, slots: n * perPeer, scheme: schemeDynamic, creditSlots: 2, backlog: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		c.send(0, 1, 37, 16)
		for range 3 {
			c.f.deliverAll()
			c.poll(1, 40)
			c.poll(0, 40)
		}
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.drain(10000); err != nil {
		t.Fatal(err)
	}
	in, _ := c.eng[1].Quota(0)
	share := c.eng[1].DataRegion() / n
	if in < 3*share {
		t.Fatalf("busy sender's quota %d, static share %d: no stealing", in, share)
	}
	if c.counter(1, "steals") == 0 || c.counter(1, "monitoring_points") == 0 {
		t.Fatal("no monitoring points or steals counted")
	}
	pol := c.pol[1].(*extolldynamic.Policy)
	if pol.Role(0) != extolldynamic.High {
		t.Fatalf("busy sender in list %d, want high", pol.Role(0))
	}
	t.Logf("busy sender's quota %d (share %d), %d steals, %d compulsory requests", in, share, c.counter(1, "steals"), c.counter(1, "compulsory_requests"))
}

// A sender that was busy and went quiet holds credits beyond its reduced
// quota; when another sender needs them, it is asked to return them and
// answers exactly once.
func TestCompulsoryReturnTakesBackAnIdleSendersCredits(t *testing.T) {
	const n, perPeer = 4, 12
	c, err := newCluster(clusterOpts{n: n, slots: n * perPeer, scheme: schemeDynamic, creditSlots: 2, backlog: 1024})
	if err != nil {
		t.Fatal(err)
	}
	phase := func(src int) {
		for range 150 {
			c.send(src, 1, 37, 16)
			for range 3 {
				c.f.deliverAll()
				for r := range n {
					c.poll(r, 40)
				}
			}
			if err := c.check(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.drain(10000); err != nil {
			t.Fatal(err)
		}
	}
	phase(0)
	_, held := c.eng[1].Quota(0)
	phase(2)
	in0, cur0 := c.eng[1].Quota(0)
	in2, _ := c.eng[1].Quota(2)
	t.Logf("after phase 1 sender 0 held %d; after phase 2: sender 0 quota %d holds %d, sender 2 quota %d; %d requests",
		held, in0, cur0, in2, c.counter(1, "compulsory_requests"))
	if c.counter(1, "compulsory_requests") == 0 {
		t.Fatal("no compulsory credit return request")
	}
	if in2 <= in0 {
		t.Fatalf("quota did not follow the activity: sender 0 %d, sender 2 %d", in0, in2)
	}
	if got, want := c.counter(0, "compulsory_responses_sent"), c.counter(1, "compulsory_requests"); got != want {
		t.Fatalf("%d responses to %d requests", got, want)
	}
}

// Random schedules of sends, receives, deliveries and delays, under each
// credit scheme: the mailbox never overflows, nothing deadlocks, every
// message arrives once and in order, no quota drops below the static
// slots, and every compulsory request gets exactly one response.
func TestFlowControlPropertiesUnderRandomSchedules(t *testing.T) {
	// What the schedules exercised, so that a weakened generator shows.
	seen := map[string]int64{}
	names := []string{"delayed_sends", "credit_packets", "credit_packets_deferred", "piggybacked_credits",
		"threshold_by_piggyback", "monitoring_points", "steals", "compulsory_requests", "threshold_clamps", "grants_starved"}
	defer func() { t.Logf("exercised: %v", seen) }()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 5).Draw(t, "ranks")
		k := rapid.IntRange(1, 3).Draw(t, "credit_slots")
		sch := rapid.SampledFrom([]testScheme{schemeStatic, schemeDynamic}).Draw(t, "scheme")
		perPeer := rapid.IntRange(2*k, 2*k+45).Draw(t, "slots_per_peer")
		o := clusterOpts{n: n, slots: n * perPeer, scheme: sch, creditSlots: k,
			piggyback: rapid.Bool().Draw(t, "piggyback"), backlog: rapid.IntRange(40, 200).Draw(t, "backlog")}
		c, err := newCluster(o)
		if err != nil {
			t.Fatal(err)
		}
		hot := rapid.IntRange(1, n).Draw(t, "hot_senders")
		steps := rapid.IntRange(1, 400).Draw(t, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0, 1, 2, 3: // a send, mostly from the hot senders
				src := rapid.IntRange(0, hot-1).Draw(t, "src")
				if rapid.IntRange(0, 3).Draw(t, "cold") == 0 {
					src = rapid.IntRange(0, n-1).Draw(t, "any_src")
				}
				dst := rapid.IntRange(0, n-1).Draw(t, "dst")
				m := rapid.IntRange(1, 40).Draw(t, "packets")
				if _, err := c.send(src, dst, m, rapid.IntRange(8, 56).Draw(t, "last")); err != nil {
					t.Fatal(err)
				}
			case 4, 5, 6: // a process polls a while
				c.poll(rapid.IntRange(0, n-1).Draw(t, "poller"), rapid.IntRange(1, 30).Draw(t, "polls"))
			case 7, 8: // the network delivers some packets
				c.f.deliver(rapid.IntRange(0, n-1).Draw(t, "from"), rapid.IntRange(0, n-1).Draw(t, "to"), rapid.IntRange(1, 50).Draw(t, "count"))
			case 9: // time passes; policies are polled
				c.clock.Advance(core.PolicyPollInterval)
				c.eng[rapid.IntRange(0, n-1).Draw(t, "ticker")].Tick()
			}
			if err := c.check(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if err := c.drain(100000); err != nil {
			t.Fatal(err)
		}
		for r := range n {
			for _, name := range names {
				seen[name] += c.counter(r, name)
			}
		}
	})
}

// The hot path allocates nothing: a one-packet message out and in, with
// credits returning.
func TestSendAndPollDoNotAllocate(t *testing.T) {
	for _, sch := range []testScheme{schemeNone, schemeStatic, schemeDynamic} {
		c, err := newCluster(clusterOpts{n: 2, slots: 2 * 64, scheme: sch, creditSlots: 2, piggyback: true})
		if err != nil {
			t.Fatal(err)
		}
		pkts := train(0, 1, 20)
		var sink sinkRcv
		round := func() {
			c.eng[0].Send(1, pkts)
			c.eng[1].Send(0, pkts)
			c.f.deliverAll()
			c.eng[1].Poll(10, &sink)
			c.eng[0].Poll(10, &sink)
		}
		for range 1000 {
			round()
		}
		// The fabric's in-flight queues are test scaffolding that reslices;
		// warm them so they do not grow during the measurement.
		if a := testing.AllocsPerRun(1000, round); a > 0 {
			t.Errorf("%v: %.2f allocations per round", sch, a)
		}
	}
}

type sinkRcv struct{ n int }

func (s *sinkRcv) Packet(int, uint8, []byte) { s.n++ }

func TestEquation2IsEnforced(t *testing.T) {
	_, err := newCluster(clusterOpts{n: 4, slots: 4 * 3, scheme: schemeStatic, creditSlots: 2})
	if err == nil || !strings.Contains(err.Error(), "Eq") {
		t.Fatalf("a 3-slot-per-peer mailbox with 2 credit slots: %v", err)
	}
	if _, err := newCluster(clusterOpts{n: 4, slots: 4 * 4, scheme: schemeDynamic, creditSlots: 2}); err != nil {
		t.Fatalf("data region = credit region is allowed: %v", err)
	}
}

// Equations 3–5 of seed 003: with a receiver that frees its slots at once,
// a sender of 2 KiB messages (37 packets) never waits for credits once
// quota - (threshold - 1) >= 37 (Eq. 3–4), that is from a receive buffer
// per process of ((37*(k+1)) div k) + k slots (Eq. 5) — Table 2: 57, 52,
// 50 and 49 slots for 2 to 5 credit slots. One slot less, and it waits.
// For one credit slot Eq. 5's rounding gives 75 where Eq. 4 holds from 74
// (Table 2: "unknown, >> 64"); the mechanism follows Eq. 4.
func TestEquation5GivesTheBufferThatStopsStalls(t *testing.T) {
	const train = 37
	eq5 := func(k int) int { return train*(k+1)/k + k }
	eq4 := func(k int) int { // the least buffer with quota - (Threshold(quota) - 1) >= 37
		for buf := k + 1; ; buf++ {
			if q := buf - k; q-(Threshold(q, k)-1) >= train {
				return buf
			}
		}
	}
	table2 := map[int]int{2: 57, 3: 52, 4: 50, 5: 49}
	for k := 1; k <= 5; k++ {
		if want, ok := table2[k]; ok && (eq5(k) != want || eq4(k) != want) {
			t.Errorf("k=%d: Equation 5 gives %d, Equation 4 %d, Table 2 says %d", k, eq5(k), eq4(k), want)
		}
		if k == 1 && (eq5(1) != 75 || eq4(1) != 74) {
			t.Errorf("k=1: Equation 5 gives %d, Equation 4 %d", eq5(1), eq4(1))
		}
		for _, buf := range []int{eq4(k) - 1, eq4(k)} {
			c, err := newCluster(clusterOpts{n: 2, slots: 2 * buf, scheme: schemeStatic, creditSlots: k, backlog: 4 * train})
			if err != nil {
				t.Fatal(err)
			}
			// Put the receiver's count at threshold-1 first: the worst phase,
			// which 2 KiB trains (37 is prime) then keep coming back to.
			if th := Threshold(buf-k, k); th > 1 {
				c.send(0, 1, th-1, 56)
			}
			for range 50 {
				if ok, err := c.send(0, 1, train, 56); !ok || err != nil {
					t.Fatalf("send refused: %v", err)
				}
				// The receiver drains everything; the credits come back.
				for range 3 {
					c.f.deliverAll()
					c.poll(1, 1000)
					c.poll(0, 1000)
				}
			}
			if err := c.drain(100); err != nil {
				t.Fatal(err)
			}
			delayed := c.counter(0, "delayed_sends")
			if stalls := delayed > 0; stalls != (buf < eq4(k)) {
				t.Errorf("k=%d, %d slots per process (Eq. 4: %d): %d of 50 sends waited", k, buf, eq4(k), delayed)
			}
		}
	}
}

// The experiments' patterns at their scale — alltoalls over changing
// subsets of up to 16 ranks with small mailboxes, ranks polling in random
// order and amounts — keep every invariant and drain.
func TestPhasedAlltoallsAtScale(t *testing.T) {
	var total atomic.Int64
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(6, 16).Draw(t, "ranks")
		sch := rapid.SampledFrom([]testScheme{schemeStatic, schemeDynamic}).Draw(t, "scheme")
		perPeer := rapid.IntRange(4, 40).Draw(t, "slots_per_peer")
		c, err := newCluster(clusterOpts{n: n, slots: n * perPeer, scheme: sch, creditSlots: 2,
			piggyback: rapid.Bool().Draw(t, "piggyback"), backlog: 400})
		if err != nil {
			t.Fatal(err)
		}
		for ph := range rapid.IntRange(1, 5).Draw(t, "phases") {
			active := rapid.IntRange(2, n).Draw(t, "active")
			for range rapid.IntRange(1, 3).Draw(t, "alltoalls") {
				for s := range active {
					for k := 1; k < active; k++ {
						c.send(s, (s+k)%active, 37, 48)
					}
				}
				for range rapid.IntRange(1, 20).Draw(t, "rounds") {
					c.f.deliverAll()
					for range n {
						c.poll(rapid.IntRange(0, n-1).Draw(t, "poller"), rapid.IntRange(1, 80).Draw(t, "polls"))
					}
					if err := c.check(); err != nil {
						t.Fatalf("phase %d: %v", ph, err)
					}
				}
			}
		}
		if err := c.drain(100000); err != nil {
			t.Fatal(err)
		}
		total.Add(int64(c.received()))
	})
	if total.Load() == 0 {
		t.Fatal("no message went through")
	}
	t.Logf("%d messages delivered", total.Load())
}

// Seed 003 §6.5.2, the blocked workflow: while a compulsory credit return
// request to a sender is outstanding, reaching its threshold grants it one
// credit only if it holds fewer than its static slots, and none otherwise.
func TestABlockedSenderGetsOneCreditOnlyBelowItsStaticSlots(t *testing.T) {
	for _, c := range []struct {
		name  string
		delta int32 // current − static
		want  int32
	}{{"below static", -1, 1}, {"at static", 0, 0}, {"above static", 3, 0}} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := newCluster(clusterOpts{n: 4, slots: 4 * 12, scheme: schemeDynamic, creditSlots: 2, backlog: 64})
			if err != nil {
				t.Fatal(err)
			}
			cr := creditsOf(cl.eng[1])
			r := &cr.rx[0]
			cr.setCurrent(r, int32(cr.static)+c.delta)
			r.blocked = true
			hi := cr.headIdx(0)
			r.retrieved = cr.fifo[hi]
			owed, cur := r.owed, r.current
			cr.reach(0, false)
			if got := r.owed - owed; got != c.want || r.current-cur != c.want {
				t.Fatalf("current %d (static %d), blocked: %d credits granted (current %d→%d), want %d",
					cur, cr.static, got, cur, r.current, c.want)
			}
			// The threshold pushed while blocked is 1: every packet is a
			// chance to hand out the one credit (§6.5.2).
			if cr.fifo[hi] != 1 {
				t.Fatalf("threshold pushed while blocked %d, want 1", cr.fifo[hi])
			}
		})
	}
}

// Seed 003 §6.5: stealing never takes a sender below its static slots —
// a quota asked below them is clamped to them, and the clamp reported.
func TestAVictimKeepsItsStaticSlots(t *testing.T) {
	cl, err := newCluster(clusterOpts{n: 4, slots: 4 * 12, scheme: schemeDynamic, creditSlots: 2, backlog: 64})
	if err != nil {
		t.Fatal(err)
	}
	cr := creditsOf(cl.eng[1])
	before := cr.unassigned
	intended := cr.rx[0].intended
	if v := setQuota(cr, 0, 0); v != policy.Clamped {
		t.Fatalf("a quota of 0: verdict %v, want clamped", v)
	}
	if got := cr.rx[0].intended; got != int32(cr.static) {
		t.Fatalf("a quota of 0 left sender 0 with %d, want its %d static slots", got, cr.static)
	}
	if cr.unassigned-before != int(intended)-cr.static {
		t.Fatalf("%d slots freed, want %d", cr.unassigned-before, int(intended)-cr.static)
	}
}

// Every quota proposal is answered with the quota set, in order, clamped
// or not (core.FlowQuota): a plugin policy learns from the answers which
// of its proposals the events it gets predate.
func TestEveryQuotaProposalIsAnswered(t *testing.T) {
	cl, err := newCluster(clusterOpts{n: 4, slots: 4 * 12, scheme: schemeDynamic, creditSlots: 2, backlog: 64})
	if err != nil {
		t.Fatal(err)
	}
	cr := creditsOf(cl.eng[1])
	q := int64(cr.rx[0].intended)
	before := len(cr.policy.Waiting())
	verdicts := []policy.Verdict{setQuota(cr, 0, q-3), setQuota(cr, 2, q+3), setQuota(cr, 3, 0)}
	if !reflect.DeepEqual(verdicts, []policy.Verdict{policy.Applied, policy.Applied, policy.Clamped}) {
		t.Fatalf("verdicts %v", verdicts)
	}
	var got []core.FlowEvent
	for _, ev := range cr.policy.Waiting()[before:] {
		if ev.Kind == core.FlowQuota {
			got = append(got, core.FlowEvent{Kind: ev.Kind, Peer: ev.Peer, Quota: ev.Quota})
		}
	}
	want := []core.FlowEvent{
		{Kind: core.FlowQuota, Peer: 0, Quota: int32(q - 3)},
		{Kind: core.FlowQuota, Peer: 2, Quota: int32(q + 3)},
		{Kind: core.FlowQuota, Peer: 3, Quota: int32(cr.static)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("answers %v, want %v", got, want)
	}
}

// Eq. 2 alone: a mailbox whose data region would be one slot smaller
// than its credit region is refused, whatever else would hold.
func TestEquation2RefusesADataRegionOneSlotShort(t *testing.T) {
	// 4 peers × 2 credit slots = 8; 15 slots leave a data region of 7. The
	// policy checks nothing: the mechanism must.
	careless := func(int) core.FlowControl { return carelessPolicy{} }
	_, err := newCluster(clusterOpts{n: 4, slots: 15, scheme: schemeDynamic, creditSlots: 2, policy: careless})
	if err == nil || !strings.Contains(err.Error(), "Eq. 2") {
		t.Fatalf("a data region of 7 under a credit region of 8: %v", err)
	}
	if _, err := newCluster(clusterOpts{n: 4, slots: 16, scheme: schemeDynamic, creditSlots: 2, policy: careless}); err != nil {
		t.Fatalf("data region = credit region is allowed: %v", err)
	}
}

// carelessPolicy asks for static credits with 2 credit slots and checks
// nothing about the mailbox.
type carelessPolicy struct{}

func (carelessPolicy) Setup(core.FlowInfo) (core.FlowSetup, error) {
	return core.FlowSetup{Scheme: core.FlowCredits, CreditSlots: 2}, nil
}

func (carelessPolicy) Observe(_ []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	return out
}

// A FlowQuiet asks the engine for nothing (core.FlowQuiet is for a plugin
// host): applied as such, it moves no quota, raises no event and sends no
// request — and the engine keeps reporting the monitoring points it names.
func TestAQuietStatementAsksTheEngineForNothing(t *testing.T) {
	cl, err := newCluster(clusterOpts{n: 2, slots: 2 * 58, scheme: schemeDynamic, creditSlots: 2, backlog: 64})
	if err != nil {
		t.Fatal(err)
	}
	cr := creditsOf(cl.eng[1])
	rx, unassigned, waiting := slices.Clone(cr.rx), cr.unassigned, len(cr.policy.Waiting())
	for _, d := range []core.FlowDecision{{Kind: core.FlowQuiet, Peer: 0, Value: 100}, {Kind: core.FlowQuiet, Peer: 1, Value: 2}} {
		if v := cr.apply(d); v != policy.Applied {
			t.Fatalf("%+v: verdict %v, want applied", d, v)
		}
	}
	if !reflect.DeepEqual(cr.rx, rx) || cr.unassigned != unassigned || len(cr.policy.Waiting()) != waiting || cl.eng[1].tx[0].wantReq {
		t.Fatalf("a statement changed the engine: rx %+v -> %+v, unassigned %d -> %d, events %d -> %d",
			rx, cr.rx, unassigned, cr.unassigned, waiting, len(cr.policy.Waiting()))
	}
}
