package extoll

import (
	"context"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment"
)

// simOutcome runs spec on 8 simulated ranks (one to a card) over st:
// virtual time, so every count is the same on every run, however loaded
// the machine. It checks the counts every outcome must have: at least
// least sends, the pattern's own messages summed over the ranks, and no
// more of them delayed than sent.
func simOutcome(t *testing.T, st Stack, sp Spec, least int64) *Outcome {
	t.Helper()
	o, _, err := simRun(context.Background(), 8, 1, st, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := o.Counters
	if k["fc.sends"] < least || k["fc.delayed_sends"] > k["fc.sends"] || k["frames_out"] < k["fc.sends"] {
		t.Errorf("%s, %v: %d sends (the pattern's messages: %d), %d delayed, %d frames out",
			sp.Pattern, st, k["fc.sends"], least, k["fc.delayed_sends"], k["frames_out"])
	}
	return o
}

// The sweeps' trends of seed 003 that counts decide (which sends waited
// for credits), checked by the experiment's own checkSweep on outcomes
// of the simulated fabric: a static sender in a small mailbox (8 slots
// per process) waits, in a large one (58) it does not, for multi-pingpong
// (Figs 4-5) and alltoall (Figs 6-7); in multi-pingpong the dynamic
// scheme delays no more sends than the static one. Not asserted: the
// same for the alltoall, which 8 ranks do not show (dynamic 74 %, static
// 72 % of the sends delayed).
func TestTheSweepsReproduceTheDelayedSendTrends(t *testing.T) {
	env := &experiment.Env{Out: io.Discard, Quick: true}
	x := &exp{Env: env}
	for _, c := range []struct {
		table string
		sp    Spec
		least int64
	}{
		{"multi-pingpong", Spec{Pattern: "multipingpong", Iters: 300, Warmup: 50}, 8 * 300},
		{"alltoall", Spec{Pattern: "alltoall", Iters: 5, Warmup: 2}, 8 * 7 * 5},
	} {
		res := sweepResult{}
		for _, scheme := range []string{"extoll_static", "extoll_dynamic"} {
			row := strings.TrimPrefix(scheme, "extoll_") + " k=2"
			res[row] = map[int]*Outcome{}
			for _, slots := range x.slotsSweep() {
				res[row][slots] = simOutcome(t, Stack{Scheme: scheme, CreditSlots: 2, SlotsPerPeer: slots}, c.sp, c.least)
			}
		}
		x.checkSweep(c.table, res)
	}
	want := []string{"multi-pingpong/static k=2", "multi-pingpong/dynamic at 8 slots", "alltoall/static k=2"}
	for _, c := range env.Checks() {
		if key := c.Table + "/" + c.Row; slices.Contains(want, key) {
			want = slices.DeleteFunc(want, func(s string) bool { return s == key })
			if !c.Reproduced {
				t.Errorf("%s: %s", key, c.Verdict())
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("checks not made: %v", want)
	}
}

// With 2 of 8 ranks in the alltoall, the dynamic scheme delays no more
// of their sends than the static one in the smallest mailbox (Figs 10,
// 15: the idle senders' quota goes to the active ones); a sender that
// was busy and went quiet is asked to return the credits above its
// quota (Fig 13, the compulsory credit return).
func TestAFewActiveSendersAndAHandoffUseTheDynamicScheme(t *testing.T) {
	sp := Spec{Pattern: "alltoall", Active: 2, Iters: 5, Warmup: 2}
	delayed := map[string]float64{}
	for _, scheme := range []string{"extoll_static", "extoll_dynamic"} {
		k := simOutcome(t, Stack{Scheme: scheme, CreditSlots: 2, SlotsPerPeer: 8}, sp, 2*1*5).Counters
		delayed[scheme] = pct(k["fc.delayed_sends"], k["fc.sends"])
	}
	if delayed["extoll_dynamic"] > delayed["extoll_static"] {
		t.Errorf("2 of 8 active: dynamic delayed %.1f%% of the sends, static %.1f%%", delayed["extoll_dynamic"], delayed["extoll_static"])
	}
	rest := []int{2, 3, 4, 5, 6, 7}
	k := simOutcome(t, Stack{Scheme: "extoll_dynamic", CreditSlots: 2, SlotsPerPeer: 12},
		Spec{Pattern: "handoff", Iters: 80, Senders: [][]int{{1}, rest, {1}, rest}}, 80*(1+6+1+6)).Counters
	if k["fc.compulsory_requests"] == 0 || k["fc.compulsory_responses"] == 0 || k["fc.reclaimed_credits"] == 0 {
		t.Errorf("handoff: %d compulsory requests, %d responses, %d credits reclaimed", k["fc.compulsory_requests"], k["fc.compulsory_responses"], k["fc.reclaimed_credits"])
	}
}

// counters sums an extoll counter over the BTL's instances and leaves
// other components' alone; groupCredits averages rank 0's credits toward
// each destination group, leaving out rank 0 itself.
func TestCountersSumInstancesAndCreditsAverageByGroup(t *testing.T) {
	m := core.NewMetrics()
	m.Counter("extoll.a.fc.sends").Add(3)
	m.Counter("extoll.b.fc.sends").Add(4)
	m.Counter("extoll.a.fc.delayed_sends").Add(1)
	m.Counter("ib.a.fc.sends").Add(100)
	m.Counter("extoll.a.frames_out").Add(9)
	got := counters(m)
	want := make([]int64, len(Counters))
	for i, name := range Counters {
		want[i] = map[string]int64{"fc.sends": 7, "fc.delayed_sends": 1, "frames_out": 9}[name]
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counters %v, want %v", got, want)
	}
	if d := diff(counters(m), got); !allZero(d) {
		t.Fatalf("a counter moved with nothing sent: %v", d)
	}

	// Six ranks, groups [0,2) and [2,6): rank 0's credits toward 1, and
	// toward 2..5, the latter split over two instances.
	for r, v := range map[int]int64{0: 50, 1: 8, 2: 2, 3: 4, 4: 6, 5: 0} {
		m.Gauge(core.MetricName("extoll", "a", "fc", "credits", r)).Set(v)
	}
	m.Gauge("extoll.b.fc.credits.5").Set(4)
	m.Gauge("ib.a.fc.credits.1").Set(1000)
	if got := groupCredits(m, []int{2, 0}, 6); !reflect.DeepEqual(got, []float64{8, 4}) {
		t.Fatalf("group credits %v, want [8 4]", got)
	}
}

func allZero(v []int64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// The mailbox MeasureMemory reports grows with the job by the buffer
// terms of Eqs. 7 and 8: 64 slots of 64 B per peer static (4096n), 16
// dynamic (1024n); an unknown scheme is refused.
func TestTheMeasuredMailboxIsTheBufferTermOfEquations7And8(t *testing.T) {
	for _, c := range []struct {
		scheme  string
		slots   int
		perPeer int
	}{{"extoll_static", 64, 4096}, {"extoll_dynamic", 16, 1024}} {
		small, err := MeasureMemory(c.scheme, c.slots, 16)
		if err != nil {
			t.Fatal(err)
		}
		large, err := MeasureMemory(c.scheme, c.slots, 48)
		if err != nil {
			t.Fatal(err)
		}
		if d := large.Mailbox - small.Mailbox; d != 32*c.perPeer {
			t.Errorf("%s: 32 more ranks grow the mailbox by %d B, want %d (Eq. %s)", c.scheme, d, 32*c.perPeer,
				map[string]string{"extoll_static": "7", "extoll_dynamic": "8"}[c.scheme])
		}
		if large.Accounted <= small.Accounted || large.Total() <= small.Total() {
			t.Errorf("%s: the state does not grow with the job: %+v, %+v", c.scheme, small, large)
		}
	}
	if _, err := MeasureMemory("none", 16, 4); err == nil || !strings.Contains(err.Error(), "none") {
		t.Fatalf("an unknown scheme: %v", err)
	}
}
