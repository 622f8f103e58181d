// Package sched holds the multirail scheduling policies of seed 001
// §4.4–4.5. A policy only chooses: the multiplexing mode for small and
// control messages, the striping mode for RDMA data at or above a
// threshold, and the weights. The communication scheduler in the PML does
// the work on every message and checks every decision ("policy proposes,
// mechanism disposes").
//
// The seven policies, each a registered component of kind "sched":
//
//   - binding: one subchannel for everything; with several ranks on a
//     host, each rank binds to a different one (per-process binding).
//   - round_robin: small messages in turn over the subchannels.
//   - weighted_round_robin: small messages in proportion to weights.
//   - window_round_robin: W messages on one subchannel before the next,
//     so rails of different latency reorder fewer messages.
//   - even_striping: RDMA data cut into equal stripes.
//   - weighted_striping: RDMA data cut by static weights (e.g. 4:1 for a
//     4x and a 1x rail).
//   - adaptive_striping: weighted striping whose weights follow the
//     stripes' delivery times. With W_total fixed, a message of size S
//     striped by weights W_i delivers stripe i in time t_i, so the path
//     bandwidth is BW_i = S·W_i / (t_i·W_total) (Eq. 1), BW_i ∝ W_i/t_i
//     (Eq. 2), and the weights are redistributed by
//     W'_i = (1−α)·W_i + α·W_total·(W_i/t_i) / Σ_k (W_k/t_k) (Eqs. 3–4),
//     α ∈ (0,1] keeping part of the history. W_i/t_i is measured as
//     bytes_i/t_i, the stripe's own bytes: they are S·W_i/W_total of the
//     weights the message was cut with, which are not the current ones
//     when several messages are in flight.
//
// Each policy takes the other half as a parameter: `small` chooses the
// multiplexing of a striping policy, `large` the striping of a
// multiplexing policy.
package sched

import (
	"fmt"
	"math"

	"github.com/gobtl/gobtl/core"
)

var multiplexing = []string{"binding", "round_robin", "weighted_round_robin", "window_round_robin"}
var striping = []string{"binding", "even_striping", "weighted_striping", "adaptive_striping"}

// Names lists the seven policies.
var Names = []string{"binding", "round_robin", "weighted_round_robin", "window_round_robin", "even_striping", "weighted_striping", "adaptive_striping"}

// Params returns the HCL schema of the policy called name: the same
// parameters for all seven, with name's own mode as the default of its half.
func Params(name string) []core.Param {
	small, large := "round_robin", "even_striping"
	switch name {
	case "binding":
		small, large = "binding", "binding"
	case "round_robin", "weighted_round_robin", "window_round_robin":
		small = name
	default:
		large = name
	}
	return []core.Param{
		{Name: "small", Type: core.ParamString, Default: small, Enum: multiplexing,
			Doc: "multiplexing of eager and control messages"},
		{Name: "large", Type: core.ParamString, Default: large, Enum: striping,
			Doc: "how RDMA data at or above stripe_threshold is spread"},
		{Name: "stripe_threshold", Type: core.ParamSize, Default: "64KiB", Min: "1B",
			Doc: "RDMA data at least this large is striped; smaller goes whole on one subchannel"},
		{Name: "min_stripe", Type: core.ParamSize, Default: "16KiB", Min: "1B",
			Doc: "no stripe smaller than this: a smaller share is raised to it; a message too short for every subchannel to get one leaves out the smallest weights"},
		{Name: "window", Type: core.ParamInt, Default: "8", Min: "1",
			Doc: "W of window_round_robin: messages on one subchannel before moving on"},
		{Name: "weights", Type: core.ParamStrings,
			Doc: "static weights per subchannel, in subchannel order (weighted_*), e.g. [4, 1]; unset: from the modules' bandwidths"},
		{Name: "bind", Type: core.ParamInt, Default: "-1",
			Doc: "subchannel of binding; -1: the rank's index among the ranks of its host (per-process binding)"},
		{Name: "alpha", Type: core.ParamFloat, Default: "0.5", Check: unitInterval,
			Doc: "α of adaptive_striping (Eq. 4): the share of each new measurement; 1 forgets the history"},
		{Name: "total_weight", Type: core.ParamFloat, Default: "100", Check: positiveFloat,
			Doc: "W_total: the fixed sum of the weights"},
	}
}

func init() {
	for _, name := range Names {
		name := name
		core.Register(&core.Component{
			Kind: core.KindSched, Name: name, Params: Params(name), Doc: docs[name],
			NewPolicy: func(p core.Params) (any, error) { return New(p) },
		})
	}
}

var docs = map[string]string{
	"binding":              "One subchannel for all traffic; per-process binding when several ranks share a host (seed 001 §4.4).",
	"round_robin":          "Small messages over the subchannels in turn (seed 001 §4.4).",
	"weighted_round_robin": "Small messages over the subchannels in proportion to weights (seed 001 §4.4).",
	"window_round_robin":   "W consecutive small messages per subchannel, fewer out-of-order arrivals on rails of different latency (seed 001 §4.4).",
	"even_striping":        "RDMA data cut into equal stripes over the subchannels (seed 001 §4.4).",
	"weighted_striping":    "RDMA data cut by static weights, e.g. 4:1 for a 4x and a 1x rail (seed 001 §4.4).",
	"adaptive_striping":    "RDMA data cut by weights adjusted from stripe delivery times, Eqs. 1-4 of seed 001 §4.5.",
}

// Policy is a scheduling policy: a configuration, plus for adaptive
// striping the weights it last proposed for each peer.
type Policy struct {
	small, large core.SchedMode
	threshold    int64
	minStripe    int64
	window       int
	weights      []float64
	bind         int
	alpha        float64
	total        float64
	current      map[int32][]float64 // adaptive: weights per peer
	msgPeer      int32
	msgSubs      []int32
	msgBytes     []float64
	msgTimes     []float64
	msgID        uint64
	open         bool
}

// New builds a policy from its parameters.
func New(p core.Params) (*Policy, error) {
	pol := &Policy{
		threshold: p.Size("stripe_threshold"), minStripe: p.Size("min_stripe"),
		window: p.Int("window"), bind: p.Int("bind"), alpha: p.Float("alpha"), total: p.Float("total_weight"),
		current: map[int32][]float64{},
	}
	var ok bool
	if pol.small, ok = core.ParseSchedMode(p.String("small")); !ok {
		return nil, fmt.Errorf("sched: unknown small mode %q", p.String("small"))
	}
	if pol.large, ok = core.ParseSchedMode(p.String("large")); !ok {
		return nil, fmt.Errorf("sched: unknown large mode %q", p.String("large"))
	}
	if p.Has("weights") {
		for _, s := range p.Strings("weights") {
			var w float64
			if _, err := fmt.Sscan(s, &w); err != nil || w < 0 || math.IsInf(w, 0) || math.IsNaN(w) {
				return nil, fmt.Errorf("sched: weight %q is not a non-negative number", s)
			}
			pol.weights = append(pol.weights, w)
		}
	}
	return pol, nil
}

// Setup implements core.Scheduler.
func (p *Policy) Setup(info core.SchedInfo) (core.SchedSetup, error) {
	n := len(info.Subchannels)
	if n == 0 {
		return core.SchedSetup{}, fmt.Errorf("sched: rank %d has no subchannels", info.Peer)
	}
	w := make([]float64, n)
	switch {
	case n == 1:
		// One subchannel (this rank itself through btl self, a local peer
		// through shared memory): nothing to weigh, whatever the static
		// weights say about the rails to remote peers.
		w[0] = 1
	case p.weights != nil && len(p.weights) != n:
		return core.SchedSetup{}, fmt.Errorf("sched: %d weights for the %d subchannels to rank %d", len(p.weights), n, info.Peer)
	case p.weights != nil:
		copy(w, p.weights)
	case p.large == core.SchedWeightedStriping || p.small == core.SchedWeightedRoundRobin:
		// No static weights given: the modules' bandwidths are the a
		// priori knowledge of weighted striping.
		for i, s := range info.Subchannels {
			w[i] = s.Bandwidth
		}
	default:
		// Even, and adaptive's starting point: equal weights.
		for i := range w {
			w[i] = 1
		}
	}
	w, err := normalise(w, p.total)
	if err != nil {
		return core.SchedSetup{}, fmt.Errorf("sched: rank %d: %w", info.Peer, err)
	}
	bind := p.bind
	if bind < 0 {
		bind = info.LocalRank
	}
	bind %= n
	if p.large == core.SchedAdaptiveStriping {
		p.current[int32(info.Peer)] = append([]float64(nil), w...)
	}
	return core.SchedSetup{
		Small: p.small, Large: p.large, StripeThreshold: p.threshold, MinStripe: p.minStripe,
		Window: p.window, Weights: w, TotalWeight: p.total, Bind: bind,
	}, nil
}

// normalise scales w to sum to total.
func normalise(w []float64, total float64) ([]float64, error) {
	var sum float64
	for _, v := range w {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("weight %v is not a non-negative number", v)
		}
		sum += v
	}
	if sum <= 0 {
		return nil, fmt.Errorf("weights %v sum to zero", w)
	}
	for i := range w {
		w[i] = w[i] / sum * total
	}
	return w, nil
}

// Observe implements core.Scheduler. Only adaptive striping learns: for
// every striped message it collects the stripes' delivery times and, at the
// message's last stripe, redistributes the weights of the subchannels the
// message used by Eq. 4, keeping their sum.
func (p *Policy) Observe(events []core.SchedEvent, out []core.SchedDecision) []core.SchedDecision {
	if p.large != core.SchedAdaptiveStriping {
		return out
	}
	for _, ev := range events {
		if ev.Kind != core.SchedStripeDone {
			continue
		}
		if !p.open || ev.Msg != p.msgID || ev.Peer != p.msgPeer {
			p.open, p.msgID, p.msgPeer = true, ev.Msg, ev.Peer
			p.msgSubs, p.msgBytes, p.msgTimes = p.msgSubs[:0], p.msgBytes[:0], p.msgTimes[:0]
		}
		p.msgSubs = append(p.msgSubs, ev.Sub)
		p.msgBytes = append(p.msgBytes, float64(ev.Bytes))
		p.msgTimes = append(p.msgTimes, ev.Time.Seconds())
		if ev.Last {
			p.open = false
			out = p.adapt(out)
		}
	}
	return out
}

func (p *Policy) adapt(out []core.SchedDecision) []core.SchedDecision {
	w := p.current[p.msgPeer]
	if len(p.msgSubs) < 2 || w == nil {
		return out // a message on one subchannel says nothing about the split
	}
	// Eq. 1 measures subchannel i's path bandwidth from the stripe the
	// message put on it, S·W_i/W_total bytes in t_i. W_i there is the
	// weight the message was striped with, which is not the current one
	// when several messages are in flight: each completion has moved the
	// weights since the later messages were cut. Dividing their times by
	// the current weights compounds every earlier correction (a window of
	// eight 1 MiB messages over two equal rails drove the weights to
	// 98.5:1.5 within 100 ms). The stripe's own bytes are S·W_i/W_total
	// of the weights it was cut with, and also what the scheduler really
	// sent when it rounded a share up to min_stripe, so BW_i ∝ bytes_i/t_i
	// is Eq. 2 for the right W_i.
	var sumW, sumRate float64
	for i, sub := range p.msgSubs {
		if int(sub) >= len(w) || p.msgTimes[i] <= 0 || p.msgBytes[i] <= 0 {
			return out // the clock could not time a stripe: keep the weights
		}
		sumW += w[sub]
		sumRate += p.msgBytes[i] / p.msgTimes[i]
	}
	if sumRate <= 0 || sumW <= 0 {
		return out
	}
	// Eq. 4 over the subchannels this message used; their share of
	// W_total (sumW) is what is redistributed, so the total stays fixed.
	for i, sub := range p.msgSubs {
		w[sub] = (1-p.alpha)*w[sub] + p.alpha*sumW*(p.msgBytes[i]/p.msgTimes[i])/sumRate
	}
	for i, v := range w {
		out = append(out, core.SchedDecision{Kind: core.SchedSetWeight, Peer: p.msgPeer, Sub: int32(i), Weight: v})
	}
	return out
}

// Weights returns the weights the policy last proposed for peer (adaptive
// striping), for experiments.
func (p *Policy) Weights(peer int) []float64 {
	return append([]float64(nil), p.current[int32(peer)]...)
}

func positiveFloat(v any) error {
	if f := v.(float64); !(f > 0) || math.IsInf(f, 0) {
		return fmt.Errorf("must be a positive number")
	}
	return nil
}

func unitInterval(v any) error {
	if f := v.(float64); !(f > 0 && f <= 1) {
		return fmt.Errorf("must be in (0, 1]")
	}
	return nil
}
