package sm

import (
	"bytes"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// frag32 is the pipeline's fragment of a 64 KiB message.
const frag32 = 32 << 10

// copyCost gives a fragment's copy time by mode and by the fragment's
// number. It is asked for every fragment, timed or not, so that it may
// depend on the ones before.
type copyCost func(stream bool, i int) time.Duration

// segFrags is the default segment's fragments, which a probe writes
// before it times.
const segFrags = 32

// probeFrags is what a probe writes in the mode not in use.
const probeFrags = segFrags + copySamples

// run feeds c n fragments of 32 KiB timed by cost, from fragment at on,
// and returns how many it streamed.
func run(c *copyChoice, at, n int, cost copyCost) (streamed int) {
	for i := at; i < at+n; i++ {
		stream, timed := c.next()
		d := cost(stream, i)
		if !timed {
			d = 0
		}
		if stream {
			streamed++
		}
		c.done(d, frag32)
	}
	return streamed
}

// fixed costs cached and streamed copies the same every time.
func fixed(cached, streamed time.Duration) copyCost {
	return func(stream bool, _ int) time.Duration {
		if stream {
			return streamed
		}
		return cached
	}
}

// The two states of the VM p8-bw64 measured (32 KiB): cores sharing a
// cache, cached 1.0 us and streamed 1.2; cores that do not, 4.5 and 1.2.
var (
	sharedCache   = fixed(1000*time.Nanosecond, 1200*time.Nanosecond)
	unsharedCache = fixed(4500*time.Nanosecond, 1200*time.Nanosecond)
)

func newChoice() *copyChoice {
	var c copyChoice
	c.init(segFrags)
	return &c
}

func TestASlowCachedCopyInIsAbandonedAtTheFirstProbe(t *testing.T) {
	c := newChoice()
	run(c, 0, segFrags+copySamples+probeFrags, unsharedCache)
	if !c.stream {
		t.Fatalf("after %d cached copies of 4.5 us and %d streamed of 1.2 the sender still caches", copySamples, copySamples)
	}
	// and stays with it: the probes of caching find it slow again.
	if s := run(c, segFrags+copySamples+probeFrags, 100_000, unsharedCache); c.switches != 1 || s < 99_000 {
		t.Fatalf("streamed %d of 100,000 fragments, %d switches; want ~all and 1", s, c.switches)
	}
}

func TestAFastCachedCopyInIsKeptAndProbedRarely(t *testing.T) {
	c := newChoice()
	s := run(c, 0, 100_000, sharedCache)
	if c.stream || c.switches != 0 {
		t.Fatalf("cached 1.0 us against streamed 1.2: switched %d times, streams now: %v", c.switches, c.stream)
	}
	// Probes of 37 fragments, 512 fragments apart at first, the gap
	// doubling to 16384: 100,000 fragments hold 12 of them at most.
	if c.probes > 12 || s != int(c.probes)*probeFrags {
		t.Fatalf("%d probes streamed %d fragments in 100,000; want at most 12 probes of %d", c.probes, s, probeFrags)
	}
	if c.gap != probeFragsMax {
		t.Fatalf("the gap between probes is %d fragments, want it grown to %d", c.gap, probeFragsMax)
	}
}

// Between cacheGain and streamGain neither mode moves the sender off the
// one it has.
func TestTheCopyInChoiceHoldsInsideTheHysteresisBand(t *testing.T) {
	band := fixed(1400*time.Nanosecond, 1000*time.Nanosecond) // cached 1.4x streamed
	c := newChoice()
	run(c, 0, 10_000, band)
	if c.stream || c.switches != 0 {
		t.Fatalf("caching, cached 1.4x streamed: switched %d times", c.switches)
	}
	c = newChoice()
	run(c, 0, segFrags+copySamples+probeFrags, unsharedCache)
	run(c, segFrags+copySamples+probeFrags, 10_000, band)
	if !c.stream || c.switches != 1 {
		t.Fatalf("streaming, cached 1.4x streamed: %d switches, streams now: %v", c.switches, c.stream)
	}
}

// A median decides: two of every five timed copies of the mode in use
// held up by the scheduler for milliseconds do not move the choice, in
// either state.
func TestInterruptedCopiesMoveNothing(t *testing.T) {
	hiccups := func(state copyCost, slow bool) copyCost {
		n := 0
		return func(stream bool, i int) time.Duration {
			if stream != slow {
				return state(stream, i)
			}
			if n++; n%copySamples < 2 {
				return 3 * time.Millisecond
			}
			return state(stream, i)
		}
	}
	c := newChoice()
	run(c, 0, 50_000, hiccups(sharedCache, false))
	if c.stream || c.switches != 0 {
		t.Fatalf("caching, interrupted cached copies: %d switches", c.switches)
	}
	c = newChoice()
	run(c, 0, segFrags+copySamples+probeFrags, unsharedCache)
	run(c, segFrags+copySamples+probeFrags, 50_000, hiccups(unsharedCache, true))
	if !c.stream || c.switches != 1 {
		t.Fatalf("streaming, interrupted streamed copies: %d switches", c.switches)
	}
}

// When the host moves the cores apart the sender streams within a gap of
// probes, and when it moves them back it caches again.
func TestTheCopyInChoiceFollowsTheHostsState(t *testing.T) {
	c := newChoice()
	run(c, 0, 50_000, sharedCache) // the gap grown to its longest
	streamed := run(c, 50_000, probeFragsMax+copySamples+probeFrags, unsharedCache)
	if !c.stream {
		t.Fatalf("cores moved apart: still caching %d fragments later", probeFragsMax+copySamples+probeFrags)
	}
	if c.switches != 1 || streamed == 0 {
		t.Fatalf("cores moved apart: %d switches, %d fragments streamed", c.switches, streamed)
	}
	run(c, 70_000, 50_000, unsharedCache)
	run(c, 120_000, probeFragsMax+copySamples+probeFrags, sharedCache)
	if c.stream || c.switches != 2 {
		t.Fatalf("cores moved back: streams %v after %d switches", c.stream, c.switches)
	}
}

// The first write of each fragment takes its pages' faults: those are not
// timed, so that a cold segment does not make the sender stream where
// caching is faster.
func TestTheFirstWritesOfTheSegmentAreNotTimed(t *testing.T) {
	cold := func(stream bool, i int) time.Duration {
		if i < segFrags {
			return 4500 * time.Nanosecond
		}
		return sharedCache(stream, i)
	}
	c := newChoice()
	if s := run(c, 0, 10_000, cold); s != int(c.probes)*probeFrags || c.switches != 0 {
		t.Fatalf("a cold segment: %d switches, %d fragments streamed in %d probes", c.switches, s, c.probes)
	}
}

// A cached copy into a fragment last streamed costs more than one into a
// fragment last cached (the receiver took its lines from memory into its
// own cache): the probe writes every fragment of the segment before it
// times, so that this does not keep a sender streaming where caching is
// faster.
func TestACachedProbeAfterStreamingTimesCachedFragments(t *testing.T) {
	var last [segFrags]bool // how each fragment was last written, in turn
	shared := func(stream bool, i int) time.Duration {
		prev := last[i%segFrags]
		last[i%segFrags] = stream
		switch {
		case stream:
			return 1200 * time.Nanosecond
		case prev:
			return 2500 * time.Nanosecond // over a fragment last streamed
		}
		return 1000 * time.Nanosecond
	}
	c := newChoice()
	run(c, 0, segFrags+copySamples+probeFrags, unsharedCache) // streaming now
	run(c, segFrags+copySamples+probeFrags, 4*probeFragsMin+segFrags+copySamples+probeFrags, shared)
	if c.stream || c.switches != 2 {
		t.Fatalf("cores sharing a cache again: streams %v after %d switches", c.stream, c.switches)
	}
}

// tickClock is a clock that moves, at every read, by what a copy in the
// mode its module is about to use costs: the interval around a copy is
// that cost, whatever else reads the clock.
type tickClock struct {
	now  time.Duration
	m    *Module
	cost copyCost
}

func (k *tickClock) Now() time.Duration {
	stream, _ := k.m.tx.copyIn.next()
	k.now += k.cost(stream, 0)
	return k.now
}

// copy_in = "auto" reaches the module, whose fragments follow the choice:
// with cached copies four times slower its pipeline streams, every byte
// arriving as sent, and sending allocates nothing.
func TestAutoCopyInStreamsWhenCachedCopiesRunSlow(t *testing.T) {
	if !canStream {
		t.Skip("no AVX2: copy_in = auto has nothing to choose")
	}
	mods, metrics := openRanks(t, 2, map[string]string{"copy_in": "auto"})
	if !mods[0].cfg.autoCopy {
		t.Fatal("copy_in = auto did not reach the module")
	}
	mods[0].clock = &tickClock{m: mods[0], cost: unsharedCache}
	var got int
	var bad bool
	want := make([]byte, 48<<10)
	for j := range want {
		want[j] = byte(j*13 + j>>9)
	}
	mods[1].Register(core.TypeUserBase, func(_ *core.Header, p []byte) {
		got++
		bad = bad || !bytes.Equal(p, want)
	})
	ep, _ := mods[0].Endpoint(1)
	send := func() {
		for ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, nil, want, 0) != nil {
			mods[0].Progress()
			mods[1].Progress()
		}
	}
	first := mods[0].cfg.frags + copySamples + mods[0].cfg.frags + copySamples
	for range first {
		send()
	}
	if !mods[0].tx.copyIn.stream || mods[0].st.copyStreamed == 0 {
		t.Fatalf("cached copies 4.5 us, streamed 1.2: after %d fragments the module does not stream", first)
	}
	allocs := testing.AllocsPerRun(200, func() {
		send()
		mods[1].Progress()
	})
	progressUntil(t, mods, func() bool { return got == first+201 })
	if bad {
		t.Fatal("a fragment arrived corrupt")
	}
	if allocs != 0 {
		t.Fatalf("a timed, chosen copy-in allocates %.1f times a fragment", allocs)
	}
	mods[0].st.flush()
	if v := metrics.Snapshot()[core.MetricName("sm", "", "copy_in_switches")]; v != int64(1) {
		t.Fatalf("copy_in_switches %v, want 1", v)
	}
}
