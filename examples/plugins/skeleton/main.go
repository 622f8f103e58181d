// Command skeleton is the smallest complete policy plugin for gobtl: the
// one to copy when a new policy starts (examples/plugins/aimd is a fuller
// one, with a README that walks through building and running it). It is a
// Go module of its own, imports only gobtl's core and plugins/sdk, and is
// built with `go build`.
//
// The policy schedules multirail traffic (core.Scheduler, seed 001 §4.4):
// small messages go round robin over a peer's subchannels, and RDMA data
// of at least stripe_threshold bytes is striped by weights proportional to
// each subchannel's throughput. It starts from the bandwidths the modules
// report and then follows the throughput each stripe achieved (its bytes
// over its delivery time), smoothed by an exponentially weighted moving
// average; every `every` messages to a peer it proposes new weights.
//
// What every policy must respect (core/policy.go):
//
//   - Setup runs before any traffic, and may take its time; a scheduler's
//     runs once per peer on this one instance (hence s.peers, keyed by
//     the peer), a flow-control or receive-buffer policy's once per
//     module it serves. Observe runs on the data path's progress and must
//     not block. Allocate in Setup, not in Observe. The whole lifecycle
//     is in `go doc github.com/gobtl/gobtl/plugins/sdk` and README.md.
//   - Calls never overlap: gobtl serializes them, so no locks.
//   - Decisions are proposals. In a plugin they arrive late, about events
//     of a while ago; the mechanism checks each before it applies it
//     (weights are normalised and must be finite and non-negative) and
//     drops what does not hold. Propose what is right for the events you
//     saw; never count on a decision being applied.
//   - If the plugin dies or stops answering, gobtl falls back to a built-in
//     policy (or aborts the job, as the stack file says): nothing waits on
//     it.
//
// Build and check it, from this directory:
//
//	go build -o ../../../bin/plugins/skeleton .
//	../../../bin/gobtl plugins verify ../../../bin/plugins/skeleton
//
// and name it in a stack file (stack.hcl here).
package main

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
)

// params is the schema of the policy block's body: gobtl checks a stack
// file against it before the job starts, ranges included, and reports a
// wrong value at its line.
var params = []core.Param{
	{Name: "stripe_threshold", Type: core.ParamSize, Default: "64KiB", Min: "1",
		Doc: "RDMA data at least this large is striped over the subchannels"},
	{Name: "min_stripe", Type: core.ParamSize, Default: "16KiB", Min: "1",
		Doc: "no stripe smaller than this"},
	{Name: "alpha", Type: core.ParamFloat, Default: "0.25", Min: "0.01", Max: "1",
		Doc: "share of each new throughput measurement in the moving average; 1 keeps only the last"},
	{Name: "every", Type: core.ParamInt, Default: "4", Min: "1", Max: "1000000",
		Doc: "messages to a peer between two proposals of its weights"},
}

// totalWeight is what the weights of a peer sum to.
const totalWeight = 100

// skeleton is the policy: the configuration and, per peer, the smoothed
// throughput of each subchannel.
type skeleton struct {
	threshold, minStripe int64
	alpha                float64
	every                int
	peers                map[int32]*peer
}

type peer struct {
	rate []float64 // bytes/s per subchannel, smoothed
	msgs int       // messages seen since the last proposal
}

func newSkeleton(p core.Params) (core.Scheduler, error) {
	return &skeleton{threshold: p.Size("stripe_threshold"), minStripe: p.Size("min_stripe"),
		alpha: p.Float("alpha"), every: p.Int("every"), peers: map[int32]*peer{}}, nil
}

// Setup chooses the modes for one peer and its first weights: the
// bandwidths its subchannels report.
func (s *skeleton) Setup(info core.SchedInfo) (core.SchedSetup, error) {
	n := len(info.Subchannels)
	if n == 0 {
		return core.SchedSetup{}, fmt.Errorf("skeleton: peer %d has no subchannel", info.Peer)
	}
	p := &peer{rate: make([]float64, n)}
	for i, sc := range info.Subchannels {
		p.rate[i] = max(sc.Bandwidth, 1) // a module that reports none still gets a share
	}
	s.peers[int32(info.Peer)] = p
	return core.SchedSetup{
		Small: core.SchedRoundRobin, Large: core.SchedAdaptiveStriping,
		StripeThreshold: s.threshold, MinStripe: s.minStripe,
		Weights: p.weights(make([]float64, n)), TotalWeight: totalWeight,
	}, nil
}

// Observe folds each stripe's throughput into its subchannel's average
// and proposes new weights for a peer every `every` messages.
func (s *skeleton) Observe(events []core.SchedEvent, out []core.SchedDecision) []core.SchedDecision {
	for _, e := range events {
		p := s.peers[e.Peer]
		if e.Kind != core.SchedStripeDone || p == nil || e.Sub < 0 || int(e.Sub) >= len(p.rate) || e.Time <= 0 {
			continue // not something this policy was set up for
		}
		r := &p.rate[e.Sub]
		*r = (1-s.alpha)**r + s.alpha*float64(e.Bytes)/e.Time.Seconds()
		if !e.Last {
			continue
		}
		if p.msgs++; p.msgs < s.every {
			continue
		}
		p.msgs = 0
		// A peer's decisions go together: the mechanism replaces its
		// weights with the whole run.
		sum := p.sum()
		for i, r := range p.rate {
			out = append(out, core.SchedDecision{Kind: core.SchedSetWeight, Peer: e.Peer, Sub: int32(i), Weight: totalWeight * r / sum})
		}
	}
	return out
}

// weights fills w with the rates scaled to totalWeight.
func (p *peer) weights(w []float64) []float64 {
	sum := p.sum()
	for i, r := range p.rate {
		w[i] = totalWeight * r / sum
	}
	return w
}

func (p *peer) sum() float64 {
	sum := 0.0
	for _, r := range p.rate {
		sum += r
	}
	return sum
}

func main() {
	sdk.Serve(sdk.Plugin{
		Name:         "skeleton",
		Version:      "0.1.0",
		Doc:          "the plugin to copy: round robin for small messages, RDMA data striped by each rail's measured throughput",
		Params:       params,
		NewScheduler: newSkeleton,
	})
}
