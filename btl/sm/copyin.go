package sm

import (
	"slices"
	"time"
)

// Choosing the pipeline's copy-in while the job runs (copy_in = "auto").
//
// How fast the sender writes a fragment depends on where the receiver's
// core sits, which on the VM this was measured on the host changes within
// seconds to minutes: a cached copy-in (REP MOVSB) of 32 KiB the receiver
// just read took ~1.0 us while the two vCPUs shared a last-level cache and
// 3.5-5 us while they did not (every line taken back from the other
// core's cache across the sockets' link), a streamed one (non-temporal
// stores) 1.15-1.25 us in both. Where they share a cache the receiver
// reads a cached fragment from that cache and a streamed one from memory,
// and streaming lost end to end (osu bw 1 MiB 13.3 against 8.0 GB/s);
// where they do not, streaming doubled 64 KiB bw. The sender sees only
// its own half, so it asks of streaming more than to be faster: it
// streams while its streamed copies take at most 1/streamGain of its
// cached ones, and caches again once cached ones take less than
// cacheGain times the streamed ones; between the two it keeps what it
// has (hysteresis), and a median of copySamples fragments, not a mean,
// decides, so that a copy the scheduler interrupted moves nothing.
//
// It times a fragment only around a decision: the copySamples fragments
// before a probe in the mode it uses and the copySamples fragments of the
// probe in the other mode (two clock reads each, ~20 ns against 1-5 us a
// copy); the fragments between go untimed. A probe first writes as many
// fragments as the segment has in the other mode untimed (settle): a
// cached copy into a fragment last streamed, whose lines the receiver
// then read from memory into its own cache, took 2.4-2.7 us in the shared
// state against 1.3-1.5 for a fragment last cached, and with the
// pipeline full every fragment of the segment comes round before one
// comes back. The gap between probes starts at probeFragsMin fragments
// and doubles up to probeFragsMax while the choice holds, so probing the
// slower mode (37 fragments of 32 KiB up to ~4 us slower each) costs a
// steady state under 1 % of its copy time, and a change of state is seen
// within probeFragsMax fragments (20-80 ms).
// Measured (p9-copyin, osu bw 64 KiB over sm.hcl, a build that timed
// every 32 KiB fragment: the sender's copy-in, the receiver's deliver with
// its copy-out; medians over runs, load 7-12, c2c before each run):
//
//	                          copy-in   deliver   auto streamed
//	shared (80-100 ns)  cache  1.35 us   1.21 us
//	                    stream 1.27      2.54
//	                    auto   1.51/1.30 1.28      15 % of fragments
//	unshared (180-260)  cache  5.21      2.95
//	                    stream 1.30      2.56
//	                    auto   2.26/1.30 2.03      46 %
//
// So the slower stage is the receiver's when streaming shares a cache
// (memory against the shared cache) and the sender's when caching does
// not; the sender's own times, with the margins below, pick the faster
// pipeline in both. Over 30 rotations of the three (bw at load ~10,
// 0.1-12 GB/s) auto was faster than cache in 18 and than stream in 18
// (shared state: 14 and 13 of 18), but over 8 rotations of 64 KiB, 1 MiB
// and 4 MiB it was not (against cache 4, 4, 5 of 8; stream 4, 2, 3): not
// the default until a quiet machine says so.
const (
	copySamples   = 5
	probeFragsMin = 256
	probeFragsMax = 16384
	// streamGain: streaming is taken when the cached median exceeds the
	// streamed one by more than half (the shared state's 1.0-1.5 against
	// 1.2-1.4 us is far below, the unshared 3.5-5 against 1.2 far above).
	streamGainNum, streamGainDen = 3, 2
	// cacheGain: caching is taken back when the cached median is below
	// 5/4 of the streamed one.
	cacheGainNum, cacheGainDen = 5, 4
	// copyTimedMin is the smallest fragment payload that is timed and may
	// be streamed: the pipeline's fragments are 32 KiB and up, and below
	// a few KiB the copy is too short for the clock.
	copyTimedMin = 16 << 10
)

// copyPhase is where copyChoice is between probes.
type copyPhase uint8

const (
	phaseQuiet  copyPhase = iota // the chosen mode, untimed
	phaseWarm                    // the chosen mode, timed: fresh samples to compare the probe with
	phaseSettle                  // the other mode, untimed: every fragment written in it once
	phaseProbe                   // the other mode, timed
)

// copyChoice is the sender's choice between cached and streamed copy-in
// (copy_in = "auto"): next says how to write a fragment, done takes what
// it cost.
type copyChoice struct {
	stream bool // the mode chosen
	phase  copyPhase
	left   int // fragments left in the phase
	gap    int // fragments of the next quiet phase
	settle int // fragments of a settle phase: the segment's
	// ps per byte of the last copySamples timed fragments, by mode
	// (0: cached, 1: streamed), and where the next goes.
	samples [2][copySamples]int64
	at      [2]int
	// switches counts the changes of mode, probes the probes ended.
	switches, probes uint64
}

// init starts with cached copies, untimed until every fragment of the
// segment (frags) has been written once: the first write of a fragment
// takes its pages' faults, 4-5 us per 32 KiB where a warm one took 1, and
// timed it had the first probe stream in either state.
func (c *copyChoice) init(frags int) {
	*c = copyChoice{phase: phaseQuiet, left: max(frags, 1), gap: probeFragsMin, settle: frags}
}

// next is the mode of the next fragment, and whether to time it.
func (c *copyChoice) next() (stream, timed bool) {
	switch c.phase {
	case phaseQuiet:
		return c.stream, false
	case phaseWarm:
		return c.stream, true
	case phaseSettle:
		return !c.stream, false
	}
	return !c.stream, true
}

// done counts a fragment of n bytes written as next said; d is its copy's
// time when next said to time it.
func (c *copyChoice) done(d time.Duration, n int) {
	if c.phase == phaseWarm || c.phase == phaseProbe {
		mode := c.stream != (c.phase == phaseProbe)
		i := b2i(mode)
		c.samples[i][c.at[i]] = int64(d) * 1000 / int64(max(n, 1))
		c.at[i] = (c.at[i] + 1) % copySamples
	}
	if c.left--; c.left > 0 {
		return
	}
	switch c.phase {
	case phaseQuiet:
		c.phase, c.left = phaseWarm, copySamples
	case phaseWarm:
		c.phase, c.left = phaseSettle, c.settle
		if c.left == 0 {
			c.phase, c.left = phaseProbe, copySamples
		}
	case phaseSettle:
		c.phase, c.left = phaseProbe, copySamples
	case phaseProbe:
		c.decide()
	}
}

// decide ends a probe: with both modes' medians fresh, keep or switch,
// and wait gap fragments (doubled while the choice holds) for the next.
func (c *copyChoice) decide() {
	c.probes++
	cached, streamed := median(c.samples[0]), median(c.samples[1])
	want := c.stream
	if c.stream {
		want = cached*cacheGainDen >= streamed*cacheGainNum
	} else {
		want = cached*streamGainDen > streamed*streamGainNum
	}
	if want != c.stream {
		c.stream = want
		c.switches++
		c.gap = probeFragsMin
	} else {
		c.gap = min(2*c.gap, probeFragsMax)
	}
	c.phase, c.left = phaseQuiet, c.gap
}

func median(s [copySamples]int64) int64 {
	slices.Sort(s[:])
	return s[copySamples/2]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// copyInChosen writes a fragment's payload as the module's copyChoice
// says, timing it when the choice asks.
func (m *Module) copyInChosen(dst, src []byte) {
	c := &m.tx.copyIn
	stream, timed := c.next()
	if stream {
		m.st.copyStreamed++
	}
	if !timed {
		copyOut(dst, src, stream)
		c.done(0, len(src))
		return
	}
	t0 := m.clock.Now()
	copyOut(dst, src, stream)
	c.done(m.clock.Now()-t0, len(src))
	m.st.copySwitches = c.switches
}
