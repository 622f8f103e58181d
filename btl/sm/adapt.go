package sm

import (
	"math/bits"
	"time"

	"github.com/gobtl/gobtl/core"
)

// Choosing the mechanism while the job runs (choose_mechanism).
//
// Which of CMA and the copy pipeline moves a large message alone faster
// depends on a state no start-up probe can follow: on the VM this was
// measured on, the host moves the two vCPUs between cores that share a
// last-level cache (1 MiB by the pipeline in 42-50 us, by CMA from both
// ends in 62-90) and cores that do not (pipeline 150-250 us, CMA ~90),
// and flips within seconds; other work on the node favours CMA too
// (pipeline medians of 0.2-9.7 ms under load against CMA's 0.09-0.25).
// So where a mechanism block lets a message go by CMA (core.MechRule.
// Choose), the sender offers CMA and the receiver's endpoint for it
// chooses: it keeps, per power-of-two size class, an EWMA of the bytes per
// microsecond each mechanism delivered, from the START to the last byte
// as the receiver sees it (only the receiver sees when a pipelined
// message is all there), takes the faster, and now and then takes the
// other (a probe) so that a change of state is seen within a few
// milliseconds. The PML carries the choice: a REPLY without keys tells
// the sender to pump (pml rendezvous.go).
//
// It is off by default (config.go, sm.hcl): on a quiet machine in the
// shared-cache state it took CMA for a large share of 1 MiB messages
// (pml.rdma_declined against rndv_sends) and the ping-pong's median was
// worse than the pipeline's, although under load it was far better. The
// receiver's time from the START to the last byte apparently favours CMA
// over what the ping-pong sees end to end; that is the next thing to find.

const (
	// mechAlpha is the weight of a new observation of the faster
	// mechanism in its EWMA. It is observed with every message, so a state
	// change that slows it shows within about four messages; an EWMA of
	// bytes per microsecond, not of time, lets one message the scheduler
	// held for milliseconds cost the estimate at most a quarter.
	mechAlpha = 0.25
	// probeAlpha is the weight of a probe's observation: probes are rare,
	// so that one probe in the new state is enough to switch when the
	// slower mechanism became clearly faster (1 MiB: the pipeline's 200 us
	// becoming 50 against CMA's 90).
	probeAlpha = 0.5
	// probeEvery, probeGap and probeGapMax: the slower mechanism is taken
	// once at least probeEvery messages of the class and the class's gap
	// went by since it was last. The gap starts at probeGap and doubles
	// with every probe, up to probeGapMax, while the same mechanism stays
	// the faster; it starts again at probeGap when the faster changes. A
	// probe costs one message the difference between the two (1 MiB: 40
	// us when the pipeline is the faster, 110 when CMA is); one probe a
	// millisecond would be one message in 10 of a 1 MiB ping-pong, 5-12 %
	// of its time, one every 16 ms about one in 160. So a steady state
	// costs well under 1 %, and a change that makes the slower mechanism
	// faster is seen within 16 ms, a change that makes the faster slower at
	// once (it is measured every message) — while the host's states last
	// seconds to minutes. The message count bounds the probes of sizes
	// that take longer than the gap.
	probeEvery  = 8
	probeGap    = time.Millisecond
	probeGapMax = 16 * time.Millisecond
)

// mechClass is what a receiver knows of one size class of a sender's
// messages.
type mechClass struct {
	// rate is the EWMA of bytes per microsecond by the pipeline [0] and
	// by CMA [1]; 0: not measured yet.
	rate [2]float64
	// since counts the messages that took the faster mechanism since the
	// last probe, at probed; gap is the time to the next one (0:
	// probeGap), for best the faster then.
	since  int
	probed time.Duration
	gap    time.Duration
	best   int
}

// mechChoice is a receiver's choice between CMA and the pipeline for the
// messages of one sender, by size class: (2^(k-1), 2^k] bytes is class k.
type mechChoice struct {
	class [64]mechClass
}

func (c *mechChoice) of(size int) *mechClass {
	return &c.class[bits.Len(uint(max(size, 1)-1))]
}

// faster is 1 when CMA has delivered more bytes per microsecond than the
// pipeline, else 0: the pipeline, sm's fixed default, until CMA is known.
func (k *mechClass) faster() int {
	if k.rate[1] > k.rate[0] {
		return 1
	}
	return 0
}

// choose reports whether a message of size bytes goes by CMA.
func (c *mechChoice) choose(size int, now time.Duration) bool {
	k := c.of(size)
	best := k.faster()
	if best != k.best {
		k.best, k.gap = best, probeGap
	}
	due := k.since >= probeEvery && now-k.probed >= max(k.gap, probeGap)
	if k.rate[1-best] == 0 {
		// Never measured: the second message of the class finds out.
		due = k.since >= 1
	}
	if due {
		k.since, k.probed, k.gap = 0, now, min(2*max(k.gap, probeGap), probeGapMax)
		return best == 0
	}
	k.since++
	return best == 1
}

// done takes in that a message of size bytes arrived by CMA (cma) or the
// pipeline d after the choice.
func (c *mechChoice) done(size int, cma bool, d time.Duration) {
	k := c.of(size)
	us := max(d, time.Nanosecond).Seconds() * 1e6
	r := float64(size) / us
	m := 0
	if cma {
		m = 1
	}
	if k.rate[m] == 0 {
		k.rate[m] = r
		return
	}
	a := mechAlpha
	if m != k.faster() {
		a = probeAlpha
	}
	k.rate[m] += a * (r - k.rate[m])
}

var _ core.MechChooser = (*peer)(nil)

// ChooseRDMA chooses for a message from this peer that it offered by CMA
// (core.MechChooser): by CMA or by the pipeline, whichever delivered this
// size class's bytes faster lately, now and then the other.
func (p *peer) ChooseRDMA(size int, now time.Duration) bool { return p.choice.choose(size, now) }

// MechDone takes in how long a message from this peer took by the
// mechanism ChooseRDMA chose.
func (p *peer) MechDone(size int, rdma bool, d time.Duration) { p.choice.done(size, rdma, d) }

// chooseIn is table t with every rule that allows CMA at some depth left
// to the receiver's choice (core.MechRule.Choose). sm's default table,
// which never reads by CMA, gives way to chooseMech.
func chooseIn(t core.MechTable, isDefault bool) core.MechTable {
	if isDefault {
		return chooseMech
	}
	c := make(core.MechTable, len(t))
	for i, r := range t {
		r.Choose = r.RDMADepth >= 0
		c[i] = r
	}
	return c
}

// chooseMech is sm's default table with choose_mechanism: a message alone
// above 64 KiB is offered by CMA and the receiver chooses; up to 64 KiB,
// and behind other rendezvous sends to the same peer (osu bw's window,
// where both processes copy at once anyway), the pipeline as in
// defaultMech. At 64 KiB the pipeline had both the lower median and the
// lower 90th percentile over 1,209 idle pairs in both of the VM's states
// (12.0 us and 29.2 against CMA's 18.3 and 30.7), so there is nothing to
// choose; and 32 pairs under load 15-22 with the choice (probes every 1
// ms) put it ahead in one measure and behind in another. From 256 KiB the
// pipeline's tail is CMA's double or worse (1 MiB: 90th percentile 223 us
// against 108), which is what the choice wins back.
var chooseMech = core.MechTable{
	{Max: 64 << 10, RDMADepth: core.NoRDMA},
	{RDMADepth: 0, Choose: true},
}
