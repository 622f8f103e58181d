package pml

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
)

// scripted is a choice of mechanism (chooser) whose choices a test
// dictates, message by message, and which records what the PML tells it.
type scripted struct {
	mu     sync.Mutex
	script []bool // choices in order; past its end, the last one
	asked  []int  // sizes choose was asked about
	told   []doneCall
}

type doneCall struct {
	size int
	rdma bool
	d    time.Duration
}

func (s *scripted) choose(size int, _ time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, size)
	i := min(len(s.asked), len(s.script)) - 1
	return s.script[i]
}

func (s *scripted) done(size int, rdma bool, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.told = append(s.told, doneCall{size, rdma, d})
}

// chooseWorld is two ranks over one inproc rail with table mech, each
// rank's choice for the other's messages made by its own script.
func chooseWorld(t *testing.T, mech core.MechTable, scripts [2][]bool) (*world, [2]*scripted) {
	t.Helper()
	f := inproc.New(2, nil)
	f.Rail("r", inproc.RailOptions{Mech: mech})
	w := &world{f: f}
	var cs [2]*scripted
	for r := range 2 {
		cs[r] = &scripted{script: scripts[r]}
		c, err := New(r, 2, f.Modules(r), Options{Metrics: core.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		c.e.mu.Lock()
		c.e.chans.get(1 - r).choice = cs[r]
		c.e.mu.Unlock()
		w.comms = append(w.comms, c)
	}
	t.Cleanup(w.close)
	return w, cs
}

// mechCounts are the sender's messages by RDMA and by the pipeline, and
// the offers of RDMA the receiver turned down.
func mechCounts(c *Comm) (rdma, pipe, declined int64) {
	m := c.Metrics()
	return m.Counter("pml.rndv_sends").Load(), m.Counter("pml.pipeline_sends").Load(), m.Counter("pml.rdma_declined").Load()
}

var chooseTable = core.MechTable{{Max: 8 << 10, RDMADepth: core.NoRDMA}, {RDMADepth: 0, Choose: true}}

// The receiver chooses, message by message, and both ends agree
// on what each message used: the sender counts it by the mechanism the
// receiver chose (a REPLY without keys turned its rdma_read offer into a
// pipeline), the data arrive whole either way, and the receiver's chooser
// hears how long each took by the mechanism it chose.
func TestTheReceiverChoosesAndTheSenderFollows(t *testing.T) {
	const n = 64 << 10
	script := []bool{true, false, false, true, false, true, true, false}
	w, cs := chooseWorld(t, chooseTable, [2][]bool{{true}, script})
	w.run(t, func(c *Comm) error {
		buf := make([]byte, n)
		for i, want := range script {
			if c.Rank() == 1 {
				if _, err := c.Recv(buf, 0, 0); err != nil {
					return err
				}
				if !bytes.Equal(buf, pattern(make([]byte, n), i)) {
					t.Errorf("message %d (RDMA %v) arrived corrupt", i, want)
				}
				continue
			}
			r0, p0, d0 := mechCounts(c)
			if err := c.Send(pattern(buf, i), 1, 0); err != nil {
				return err
			}
			r1, p1, d1 := mechCounts(c)
			if r1-r0 != b2i(want) || p1-p0 != b2i(!want) || d1-d0 != b2i(!want) {
				t.Errorf("message %d: %d by RDMA, %d by the pipeline, %d declined; the receiver chose RDMA %v", i, r1-r0, p1-p0, d1-d0, want)
			}
		}
		return nil
	})
	got := cs[1]
	if len(got.asked) != len(script) || len(got.told) != len(script) {
		t.Fatalf("the receiver was asked %d times and told %d times, want %d each", len(got.asked), len(got.told), len(script))
	}
	for i, d := range got.told {
		if got.asked[i] != n || d.size != n || d.rdma != script[i] || d.d <= 0 {
			t.Errorf("message %d: asked about %d bytes, told %+v; want %d bytes by RDMA %v in a positive time", i, got.asked[i], d, n, script[i])
		}
	}
	if len(cs[0].asked) != 0 {
		t.Errorf("the sender's choice was asked %d times; only a receiver chooses", len(cs[0].asked))
	}
}

// The choice never goes beyond the table: a receiver that would always
// read is not asked about a size the table keeps on the pipeline, nor
// about a message queued behind others to the same peer beyond the rule's
// depth, and none of those moves by RDMA; nor is it asked where the
// rule lets RDMA alone decide (Choose false).
func TestTheChoiceStaysWithinTheTable(t *testing.T) {
	const small, big, window = 6 << 10, 64 << 10, 8
	for _, tc := range []struct {
		name             string
		mech             core.MechTable
		wantAsked        int // of the small message alone, then the window
		wantRDMA, wantPP int64
	}{
		// The window's first message goes alone, the others behind it.
		{"choose", chooseTable, 1, 1, 1 + window - 1},
		{"fixed", core.MechTable{{Max: 8 << 10, RDMADepth: core.NoRDMA}, {RDMADepth: 0}}, 0, 1, 1 + window - 1},
		{"never", core.MechTable{{RDMADepth: core.NoRDMA, Choose: true}}, 0, 0, 1 + window},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, cs := chooseWorld(t, tc.mech, [2][]bool{{true}, {true}})
			w.run(t, func(c *Comm) error {
				bufs := make([][]byte, window)
				for i := range bufs {
					bufs[i] = make([]byte, big)
				}
				if c.Rank() == 1 {
					if _, err := c.Recv(bufs[0][:small], 0, 0); err != nil {
						return err
					}
					return recvWindow(t, c, bufs)
				}
				if err := c.Send(bufs[0][:small], 1, 0); err != nil {
					return err
				}
				if err := sendWindow(c, bufs); err != nil {
					return err
				}
				if r, p, _ := mechCounts(c); r != tc.wantRDMA || p != tc.wantPP {
					t.Errorf("%d by RDMA, %d by the pipeline; want %d and %d", r, p, tc.wantRDMA, tc.wantPP)
				}
				return nil
			})
			if got := len(cs[1].asked); got != tc.wantAsked {
				t.Errorf("the receiver was asked %d times (sizes %v), want %d", got, cs[1].asked, tc.wantAsked)
			}
		})
	}
}

// Eager messages never meet the choice: no question, no report, so no
// clock read (the PML reads it only around a question).
func TestEagerMessagesAreNotChosenFor(t *testing.T) {
	w, cs := chooseWorld(t, chooseTable, [2][]bool{{true}, {true}})
	w.run(t, func(c *Comm) error {
		for _, n := range []int{8, 2 << 10, 4 << 10} {
			buf := make([]byte, n)
			for i := range 100 {
				var err error
				if c.Rank() == 0 {
					err = c.Send(pattern(buf, i), 1, 0)
				} else {
					_, err = c.Recv(buf, 0, 0)
				}
				if err != nil {
					return fmt.Errorf("%d bytes: %w", n, err)
				}
			}
		}
		return nil
	})
	for r, c := range cs {
		if len(c.asked) != 0 || len(c.told) != 0 {
			t.Errorf("rank %d's chooser was asked %d times and told %d times about eager messages", r, len(c.asked), len(c.told))
		}
	}
}

// feed runs n messages of size bytes through c, one every gap on a clock
// that starts at *now, each taking pipe or dma by the mechanism chosen,
// and returns how many went by RDMA and the message indices of the
// choices that were not the majority's.
func feed(c *mechChoice, now *time.Duration, n, size int, gap, pipe, dma time.Duration) (byRDMA int, choices []bool) {
	for range n {
		rdma := c.choose(size, *now)
		d := pipe
		if rdma {
			d, byRDMA = dma, byRDMA+1
		}
		c.done(size, rdma, d)
		choices = append(choices, rdma)
		*now += gap
	}
	return byRDMA, choices
}

// The receiver takes the faster mechanism, and when the host's state
// makes the other one faster it follows: the faster one is measured with
// every message, so its slowing shows within a few messages; the slower
// one's speeding up shows at its next probe, at most probeGapMax (and
// probeEvery messages) later. 1 MiB, a message every 100 us: the pipeline
// 50 us against RDMA's 90 (shared cache), then 200 against 90 (no shared
// cache), then back, then RDMA faster still. After the switch only probes
// take the slower one.
func TestTheChoiceFollowsTheFasterMechanism(t *testing.T) {
	const size, n = 1 << 20, 400
	var c mechChoice
	var now time.Duration
	gap := 100 * time.Microsecond
	late := int(probeGapMax/gap) + probeEvery + 1
	phases := []struct {
		pipe, rdma time.Duration
		wantRDMA   bool
		settle     int // messages the switch may take
	}{
		{50 * time.Microsecond, 90 * time.Microsecond, false, 2},
		{200 * time.Microsecond, 90 * time.Microsecond, true, 6},
		{50 * time.Microsecond, 90 * time.Microsecond, false, late},
		{50 * time.Microsecond, 30 * time.Microsecond, true, late},
	}
	for i, ph := range phases {
		_, ch := feed(&c, &now, n, size, gap, ph.pipe, ph.rdma)
		sw := firstRun(ch, ph.wantRDMA, 5)
		if sw > ph.settle {
			t.Errorf("phase %d (pipeline %v, RDMA %v): switched only at message %d, want within %d", i, ph.pipe, ph.rdma, sw, ph.settle)
			continue
		}
		// Probes after the switch: gaps of 1, 2, 4, 8, 16 ms, then 16 ms
		// apart, in the 40 ms of a phase.
		wrong := 0
		for _, rdma := range ch[sw:] {
			if rdma != ph.wantRDMA {
				wrong++
			}
		}
		if wrong > 8 {
			t.Errorf("phase %d (pipeline %v, RDMA %v): %d of the %d messages after the switch took the slower mechanism",
				i, ph.pipe, ph.rdma, wrong, n-sw)
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
		t.Fatalf("switched to RDMA at message %d, probed the pipeline next at %d; want within 6 and %v later", sw, next, probeGap)
	}
}

// Each size class learns on its own: 64 KiB going faster by RDMA does not
// move 1 MiB off the pipeline. And one message the scheduler held for
// 10 ms costs the faster mechanism's estimate a quarter, not its place.
func TestTheChoiceKeepsSizeClassesApartAndShrugsOffAStall(t *testing.T) {
	var c mechChoice
	var now time.Duration
	feed(&c, &now, 50, 64<<10, 50*time.Microsecond, 20*time.Microsecond, 10*time.Microsecond)
	feed(&c, &now, 50, 1<<20, 50*time.Microsecond, 50*time.Microsecond, 90*time.Microsecond)
	if k := c.of(64 << 10); k.faster() != 1 {
		t.Fatalf("64 KiB: rates %v, want RDMA faster", k.rate)
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

// Each peer's choice is its own: a receiver's first offer from a peer
// makes that peer's choice, and what one peer's messages took moves no
// other peer's.
func TestEveryPeerHasAChoiceOfItsOwn(t *testing.T) {
	a, b := &peer{subs: []*sub{{}}}, &peer{subs: []*sub{{}}}
	e := &engine{opts: Options{Clock: core.SystemClock}}
	e.rndv.e = e
	for _, p := range []*peer{a, b} {
		r := &Request{accept: 1 << 20}
		e.rndv.chooseRDMA(r, p)
		r.x = nil
	}
	if a.choice == nil || b.choice == nil || a.choice == b.choice {
		t.Fatalf("choices %p and %p, want one of each peer's", a.choice, b.choice)
	}
	ca := a.choice.(*mechChoice)
	ca.done(1<<20, true, 10*time.Microsecond)
	ca.done(1<<20, false, 100*time.Microsecond)
	if !ca.choose(1<<20, 0) || b.choice.(*mechChoice).of(1<<20).rate != [2]float64{} {
		t.Fatalf("peer a: rates %v, b: %v", ca.of(1<<20).rate, b.choice.(*mechChoice).of(1<<20).rate)
	}
}
