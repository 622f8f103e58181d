package pml

import (
	"math/bits"
	"time"
)

// Choosing the rendezvous mechanism while the job runs (core.MechRule.
// Choose): a single copy by RDMA or the send-based pipeline. When the
// faster of the two depends on a state that changes within seconds — on
// shared memory, which cores the host runs the two processes on and what
// else shares them (btl/sm's adapt.go has the measurements) — no table
// fixed at start-up can follow it, so where a module's rule lets it, the
// sender offers RDMA (rdma_read) and the receiver chooses. It keeps, per
// peer and per power-of-two size class, an EWMA of the bytes per
// microsecond each mechanism delivered, from the START to the last byte as
// the receiver sees it (only the receiver sees when a pipelined message is
// all there), takes the faster, and now and then takes the other (a
// probe) so that a change of state is seen within a few milliseconds. A
// REPLY without keys tells the sender to pump (rendezvous.go).
//
// The measurement is the PML's, for any transport: the module's
// performance model (its mechanism table) says where choosing is worth
// it, and the PML, which sees both mechanisms deliver, measures.

// chooser is what a receiver's choice of mechanism for one peer's
// messages does: mechChoice, or a test's script.
type chooser interface {
	// choose reports whether a message of size bytes, offered by RDMA,
	// moves by RDMA (else by the pipeline); now is the PML clock's.
	choose(size int, now time.Duration) bool
	// done takes in that the data of a message of size bytes arrived by
	// RDMA (rdma) or by the pipeline d after choose chose for it.
	done(size int, rdma bool, d time.Duration)
}

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
	// by RDMA [1]; 0: not measured yet.
	rate [2]float64
	// since counts the messages that took the faster mechanism since the
	// last probe, at probed; gap is the time to the next one (0:
	// probeGap), for best the faster then.
	since  int
	probed time.Duration
	gap    time.Duration
	best   int
}

// mechChoice is a receiver's choice between RDMA and the pipeline for the
// messages of one sender, by size class: (2^(k-1), 2^k] bytes is class k.
type mechChoice struct {
	class [64]mechClass
}

func (c *mechChoice) of(size int) *mechClass {
	return &c.class[bits.Len(uint(max(size, 1)-1))]
}

// faster is 1 when RDMA has delivered more bytes per microsecond than
// the pipeline, else 0: the pipeline until RDMA is known.
func (k *mechClass) faster() int {
	if k.rate[1] > k.rate[0] {
		return 1
	}
	return 0
}

// choose reports whether a message of size bytes goes by RDMA.
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

// done takes in that a message of size bytes arrived by RDMA (rdma) or
// the pipeline d after the choice.
func (c *mechChoice) done(size int, rdma bool, d time.Duration) {
	k := c.of(size)
	us := max(d, time.Nanosecond).Seconds() * 1e6
	r := float64(size) / us
	m := 0
	if rdma {
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
