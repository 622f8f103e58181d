package sm

import (
	"reflect"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// feed runs n messages of size bytes through c, one every gap on a clock
// that starts at *now, each taking pipe or cma by the mechanism chosen,
// and returns how many went by CMA and the message indices of the
// choices that were not the majority's.
func feed(c *mechChoice, now *time.Duration, n, size int, gap, pipe, cma time.Duration) (byCMA int, choices []bool) {
	for range n {
		rdma := c.choose(size, *now)
		d := pipe
		if rdma {
			d, byCMA = cma, byCMA+1
		}
		c.done(size, rdma, d)
		choices = append(choices, rdma)
		*now += gap
	}
	return byCMA, choices
}

// The receiver takes the faster mechanism, and when the host's state
// makes the other one faster it follows: the faster one is measured with
// every message, so its slowing shows within a few messages; the slower
// one's speeding up shows at its next probe, at most probeGapMax (and
// probeEvery messages) later. 1 MiB, a message every 100 us: the pipeline
// 50 us against CMA's 90 (shared cache), then 200 against 90 (no shared
// cache), then back, then CMA faster still. After the switch only probes
// take the slower one.
func TestTheChoiceFollowsTheFasterMechanism(t *testing.T) {
	const size, n = 1 << 20, 400
	var c mechChoice
	var now time.Duration
	gap := 100 * time.Microsecond
	late := int(probeGapMax/gap) + probeEvery + 1
	phases := []struct {
		pipe, cma time.Duration
		wantCMA   bool
		settle    int // messages the switch may take
	}{
		{50 * time.Microsecond, 90 * time.Microsecond, false, 2},
		{200 * time.Microsecond, 90 * time.Microsecond, true, 6},
		{50 * time.Microsecond, 90 * time.Microsecond, false, late},
		{50 * time.Microsecond, 30 * time.Microsecond, true, late},
	}
	for i, ph := range phases {
		_, ch := feed(&c, &now, n, size, gap, ph.pipe, ph.cma)
		sw := firstRun(ch, ph.wantCMA, 5)
		if sw > ph.settle {
			t.Errorf("phase %d (pipeline %v, CMA %v): switched only at message %d, want within %d", i, ph.pipe, ph.cma, sw, ph.settle)
			continue
		}
		// Probes after the switch: gaps of 1, 2, 4, 8, 16 ms, then 16 ms
		// apart, in the 40 ms of a phase.
		wrong := 0
		for _, rdma := range ch[sw:] {
			if rdma != ph.wantCMA {
				wrong++
			}
		}
		if wrong > 8 {
			t.Errorf("phase %d (pipeline %v, CMA %v): %d of the %d messages after the switch took the slower mechanism",
				i, ph.pipe, ph.cma, wrong, n-sw)
		}
	}
}

// firstRun is the index of the first of n consecutive choices equal to want.
func firstRun(ch []bool, want bool, n int) int {
	run := 0
	for i, c := range ch {
		if c != want {
			run = 0
			continue
		}
		if run++; run == n {
			return i - n + 1
		}
	}
	return len(ch)
}

// While one mechanism stays faster the other is still taken now and then,
// to see a change of state: never within probeEvery messages or probeGap
// of the last probe, never more than probeGapMax (or probeEvery messages)
// after it, the gaps growing from probeGap to probeGapMax. A message every
// 50 us (1 MiB ping-pong in the shared-cache state): after the first few,
// one probe every 16 ms, every 320th message; a message every 1 ms (4 MiB
// under load): after the first few, every 16th.
func TestTheChoiceProbesTheSlowerMechanism(t *testing.T) {
	for _, tc := range []struct {
		gap        time.Duration
		lo, hi     int // probes in 10,000 messages
		sparsestIn int // messages between two probes, at most
	}{
		{50 * time.Microsecond, 10000/320 - 1, 10000/320 + 6, 320 + 1},
		{time.Millisecond, 10000/16 - 1, 10000/16 + 6, 16 + 1},
	} {
		var c mechChoice
		var now time.Duration
		feed(&c, &now, 10, 1<<20, tc.gap, 50*time.Microsecond, 90*time.Microsecond) // both measured
		_, ch := feed(&c, &now, 10000, 1<<20, tc.gap, 50*time.Microsecond, 90*time.Microsecond)
		var probes []int
		for i, rdma := range ch {
			if rdma {
				probes = append(probes, i)
			}
		}
		if n := len(probes); n < tc.lo || n > tc.hi {
			t.Errorf("a message every %v: %d probes in 10,000 messages, want %d to %d", tc.gap, n, tc.lo, tc.hi)
		}
		for i := 1; i < len(probes); i++ {
			d := probes[i] - probes[i-1]
			if d < probeEvery || time.Duration(d)*tc.gap < probeGap {
				t.Fatalf("a message every %v: probes at %d and %d, closer than %d messages or %v", tc.gap, probes[i-1], probes[i], probeEvery, probeGap)
			}
			if d > tc.sparsestIn {
				t.Fatalf("a message every %v: probes at %d and %d, more than %d messages apart", tc.gap, probes[i-1], probes[i], tc.sparsestIn)
			}
		}
	}
}

// After a switch the probes start again at probeGap: the new state may
// not last, and the mechanism just left is the likeliest to be faster
// again soon.
func TestTheProbesStartOverAfterASwitch(t *testing.T) {
	var c mechChoice
	var now time.Duration
	gap := 100 * time.Microsecond
	feed(&c, &now, 1000, 1<<20, gap, 50*time.Microsecond, 90*time.Microsecond) // 100 ms: gaps at their longest
	_, ch := feed(&c, &now, 100, 1<<20, gap, 200*time.Microsecond, 90*time.Microsecond)
	sw := firstRun(ch, true, 5)
	next := sw
	for next < len(ch) && ch[next] {
		next++
	}
	if sw > 6 || next-sw > int(probeGap/gap)+probeEvery+1 {
		t.Fatalf("switched to CMA at message %d, probed the pipeline next at %d; want within 6 and %v later", sw, next, probeGap)
	}
}

// Each size class learns on its own: 64 KiB going faster by CMA does not
// move 1 MiB off the pipeline. And one message the scheduler held for
// 10 ms costs the faster mechanism's estimate a quarter, not its place.
func TestTheChoiceKeepsSizeClassesApartAndShrugsOffAStall(t *testing.T) {
	var c mechChoice
	var now time.Duration
	feed(&c, &now, 50, 64<<10, 50*time.Microsecond, 20*time.Microsecond, 10*time.Microsecond)
	feed(&c, &now, 50, 1<<20, 50*time.Microsecond, 50*time.Microsecond, 90*time.Microsecond)
	if k := c.of(64 << 10); k.faster() != 1 {
		t.Fatalf("64 KiB: rates %v, want CMA faster", k.rate)
	}
	k := c.of(1 << 20)
	if k.faster() != 0 {
		t.Fatalf("1 MiB: rates %v, want the pipeline faster", k.rate)
	}
	before := k.rate[0]
	c.done(1<<20, false, 10*time.Millisecond)
	if k.faster() != 0 || k.rate[0] < before*0.74 {
		t.Fatalf("after one stalled message: rates %v (pipeline was %.1f B/us)", k.rate, before)
	}
	if c.of(64<<10) == c.of(64<<10+1) || c.of(64<<10) != c.of(32<<10+1) || c.of(1) != c.of(0) {
		t.Fatal("size classes are not (2^(k-1), 2^k]")
	}
}

// choose_mechanism leaves to the receiver only what the table allows by
// CMA: without mechanism blocks a message alone above 64 KiB; with
// blocks, every rule with a single_copy_depth of 0 and up, never one of
// -1; an oversubscribed node keeps its fixed tables; off, nothing changes.
func TestChooseMechanismOnlyWhereTheTableAllowsCMA(t *testing.T) {
	c, err := smConfig(t, "choose_mechanism = true")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.attrs.Mech, chooseMech) || !c.mechDefault {
		t.Fatalf("no blocks: table %+v (default %v), want %+v", c.attrs.Mech, c.mechDefault, chooseMech)
	}
	if err := c.attrs.Mech.Validate(c.attrs.MaxSendSize); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size     int64
		inflight int
		offer    bool
	}{{16 << 10, 0, false}, {64 << 10, 0, false}, {64<<10 + 1, 0, true}, {1 << 20, 0, true}, {1 << 20, 1, false}, {64 << 20, 0, true}} {
		r := c.attrs.Mech.Lookup(tc.size)
		if got := r.UseRDMA(tc.inflight) && r.Choose; got != tc.offer {
			t.Errorf("%s with %d in flight: offered to the receiver %v, want %v", core.FormatSize(tc.size), tc.inflight, got, tc.offer)
		}
	}
	if got, x := nodeMech(c.attrs.Mech, c.mechDefault, 16, 2); !reflect.DeepEqual(got, oversubscribedMech) || !reflect.DeepEqual(x, oversubscribedExchangeMech) {
		t.Fatalf("oversubscribed: %+v and %+v, want the fixed tables", got, x)
	}

	c, err = smConfig(t, `choose_mechanism = true
mechanism {
  max = "64KiB"
  single_copy_depth = -1
}
mechanism {
  single_copy_depth = 2
}`)
	if err != nil {
		t.Fatal(err)
	}
	want := core.MechTable{{Max: 64 << 10, RDMADepth: core.NoRDMA}, {RDMADepth: 2, Choose: true}}
	if !reflect.DeepEqual(c.attrs.Mech, want) {
		t.Fatalf("blocks: table %+v, want %+v", c.attrs.Mech, want)
	}

	c, err = smConfig(t, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.attrs.Mech {
		if r.Choose {
			t.Fatalf("choose_mechanism off: table %+v leaves a choice", c.attrs.Mech)
		}
	}
}

// A peer is sm's chooser, and its choice is its own: two peers' classes
// do not share state.
func TestEveryPeerChoosesForItself(t *testing.T) {
	var _ core.MechChooser = (*peer)(nil)
	a, b := new(peer), new(peer)
	a.MechDone(1<<20, true, 10*time.Microsecond)
	a.MechDone(1<<20, false, 100*time.Microsecond)
	if !a.ChooseRDMA(1<<20, 0) || b.choice.of(1<<20).rate != [2]float64{} {
		t.Fatalf("peer a: rates %v, b: %v", a.choice.of(1<<20).rate, b.choice.of(1<<20).rate)
	}
}
