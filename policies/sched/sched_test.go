package sched

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gobtl/gobtl/core"
)

func policy(t testing.TB, name string, set map[string]string) *Policy {
	t.Helper()
	p := core.MustParams(Params(name))
	for k, v := range set {
		if err := p.SetText(k, v); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func rails(bw ...float64) core.SchedInfo {
	info := core.SchedInfo{Peer: 1}
	for _, b := range bw {
		info.Subchannels = append(info.Subchannels, core.SubchannelInfo{Bandwidth: b})
	}
	return info
}

func TestSetupModesAndWeights(t *testing.T) {
	tests := []struct {
		name    string
		policy  string
		set     map[string]string
		info    core.SchedInfo
		small   core.SchedMode
		large   core.SchedMode
		weights []float64
		bind    int
		wantErr bool
	}{
		{name: "binding binds both halves", policy: "binding", info: rails(1, 1), small: core.SchedBinding, large: core.SchedBinding, weights: []float64{50, 50}},
		{name: "binding per process uses the local rank", policy: "binding", info: core.SchedInfo{Subchannels: rails(1, 1).Subchannels, LocalRank: 3, LocalRanks: 4}, small: core.SchedBinding, large: core.SchedBinding, weights: []float64{50, 50}, bind: 1},
		{name: "round robin stripes evenly by default", policy: "round_robin", info: rails(1, 1), small: core.SchedRoundRobin, large: core.SchedEvenStriping, weights: []float64{50, 50}},
		{name: "weighted striping takes static weights", policy: "weighted_striping", set: map[string]string{"weights": "4,1"}, info: rails(1, 1), small: core.SchedRoundRobin, large: core.SchedWeightedStriping, weights: []float64{80, 20}},
		{name: "weighted striping without weights uses bandwidths", policy: "weighted_striping", info: rails(1e9, 250e6), small: core.SchedRoundRobin, large: core.SchedWeightedStriping, weights: []float64{80, 20}},
		{name: "adaptive starts even whatever the bandwidths", policy: "adaptive_striping", info: rails(1e9, 250e6), small: core.SchedRoundRobin, large: core.SchedAdaptiveStriping, weights: []float64{50, 50}},
		{name: "a window policy keeps its W", policy: "window_round_robin", set: map[string]string{"window": "16"}, info: rails(1, 1), small: core.SchedWindowRoundRobin, large: core.SchedEvenStriping, weights: []float64{50, 50}},
		{name: "too few weights is an error", policy: "weighted_striping", set: map[string]string{"weights": "4"}, info: rails(1, 1), wantErr: true},
		{name: "all-zero weights is an error", policy: "weighted_striping", set: map[string]string{"weights": "0,0"}, info: rails(1, 1), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol := policy(t, tc.policy, tc.set)
			s, err := pol.Setup(tc.info)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("setup succeeded: %+v", s)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Small != tc.small || s.Large != tc.large || s.Bind != tc.bind {
				t.Fatalf("small %v large %v bind %d", s.Small, s.Large, s.Bind)
			}
			for i, w := range tc.weights {
				if math.Abs(s.Weights[i]-w) > 1e-9 {
					t.Fatalf("weights %v, want %v", s.Weights, tc.weights)
				}
			}
		})
	}
}

// stripe simulates the delivery of one message striped by w over rails of
// the given bandwidths: each stripe takes its share divided by its rail's
// bandwidth (seed 001 Eq. 1).
func stripe(msg uint64, size float64, w, bw []float64) []core.SchedEvent {
	var total float64
	for _, v := range w {
		total += v
	}
	var evs []core.SchedEvent
	for i := range w {
		bytes := size * w[i] / total
		evs = append(evs, core.SchedEvent{Kind: core.SchedStripeDone, Peer: 1, Sub: int32(i), Msg: msg, Last: i == len(w)-1,
			Bytes: int64(bytes), Time: time.Duration(bytes / bw[i] * 1e9)})
	}
	return evs
}

func apply(w []float64, ds []core.SchedDecision) {
	for _, d := range ds {
		w[d.Sub] = d.Weight
	}
}

func TestAdaptiveStripingConvergesToTheBandwidthRatio(t *testing.T) {
	for _, alpha := range []string{"1", "0.5", "0.2"} {
		t.Run("alpha="+alpha, func(t *testing.T) {
			pol := policy(t, "adaptive_striping", map[string]string{"alpha": alpha})
			bw := []float64{1e9, 250e6} // a 4x and a 1x rail
			s, err := pol.Setup(rails(bw...))
			if err != nil {
				t.Fatal(err)
			}
			w := s.Weights
			for i := 0; i < 60; i++ {
				apply(w, pol.Observe(stripe(uint64(i+1), 1<<20, w, bw), nil))
			}
			if r := w[0] / w[1]; math.Abs(r-4) > 0.04 {
				t.Fatalf("weights %v: ratio %.3f, want 4", w, r)
			}
			if math.Abs(w[0]+w[1]-100) > 1e-6 {
				t.Fatalf("weights %v do not sum to W_total", w)
			}
		})
	}
}

func TestAdaptiveFollowsALoadChange(t *testing.T) {
	pol := policy(t, "adaptive_striping", nil)
	s, _ := pol.Setup(rails(1e9, 1e9))
	w := s.Weights
	loaded := []float64{1e9, 0.5e9} // another job takes half of rail 1
	for i := 0; i < 40; i++ {
		apply(w, pol.Observe(stripe(uint64(i+1), 1<<20, w, loaded), nil))
	}
	if r := w[0] / w[1]; math.Abs(r-2) > 0.05 {
		t.Fatalf("loaded: weights %v, ratio %.3f, want 2", w, r)
	}
	for i := 40; i < 80; i++ {
		apply(w, pol.Observe(stripe(uint64(i+1), 1<<20, w, []float64{1e9, 1e9}), nil))
	}
	if r := w[0] / w[1]; math.Abs(r-1) > 0.03 {
		t.Fatalf("unloaded again: weights %v, ratio %.3f, want 1", w, r)
	}
}

func TestAdaptiveIgnoresUntimedAndSingleStripeMessages(t *testing.T) {
	pol := policy(t, "adaptive_striping", nil)
	pol.Setup(rails(1, 1))
	if d := pol.Observe([]core.SchedEvent{{Kind: core.SchedStripeDone, Peer: 1, Sub: 0, Msg: 1, Last: true, Time: time.Millisecond}}, nil); len(d) != 0 {
		t.Fatalf("a one-stripe message changed the weights: %v", d)
	}
	evs := stripe(2, 1<<20, []float64{50, 50}, []float64{1, 1})
	evs[0].Time = 0
	if d := pol.Observe(evs, nil); len(d) != 0 {
		t.Fatalf("an untimed stripe changed the weights: %v", d)
	}
}

// Weights stay non-negative and sum to W_total whatever the timings.
func TestAdaptiveWeightsStayNormalised(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 4).Draw(rt, "rails")
		pol := policy(t, "adaptive_striping", map[string]string{"alpha": "0.7"})
		info := core.SchedInfo{Peer: 1}
		for i := 0; i < n; i++ {
			info.Subchannels = append(info.Subchannels, core.SubchannelInfo{})
		}
		s, err := pol.Setup(info)
		if err != nil {
			rt.Fatal(err)
		}
		w := s.Weights
		for m := 0; m < 30; m++ {
			var evs []core.SchedEvent
			for i := 0; i < n; i++ {
				evs = append(evs, core.SchedEvent{Kind: core.SchedStripeDone, Peer: 1, Sub: int32(i), Msg: uint64(m + 1), Last: i == n-1,
					Bytes: rapid.Int64Range(1, 1<<30).Draw(rt, "bytes"), Time: time.Duration(rapid.Int64Range(1, 1e9).Draw(rt, "t"))})
			}
			apply(w, pol.Observe(evs, nil))
			var sum float64
			for _, v := range w {
				if v < 0 || math.IsNaN(v) {
					rt.Fatalf("weight %v", w)
				}
				sum += v
			}
			if math.Abs(sum-100) > 1e-6 {
				rt.Fatalf("weights %v sum to %v", w, sum)
			}
		}
	})
}

// Several messages in flight were all cut with the weights of the moment;
// their completions arrive one by one, each moving the weights. Each must
// be judged by the weights it was striped with (its stripes' bytes), or
// the corrections compound and the slow rail is starved.
func TestAdaptiveJudgesEachMessageByTheWeightsItWasStripedWith(t *testing.T) {
	pol := policy(t, "adaptive_striping", map[string]string{"alpha": "0.5"})
	bw := []float64{1e9, 250e6}
	s, err := pol.Setup(rails(bw...))
	if err != nil {
		t.Fatal(err)
	}
	w := s.Weights
	for window := 0; window < 10; window++ {
		cut := append([]float64(nil), w...) // the window is cut at once
		var evs []core.SchedEvent
		for m := 0; m < 8; m++ {
			evs = append(evs, stripe(uint64(8*window+m+1), 1<<20, cut, bw)...)
		}
		apply(w, pol.Observe(evs, nil))
		if r := w[0] / w[1]; r < 1 || r > 4.2 {
			t.Fatalf("window %d: weights %v, ratio %.2f overshoots the 4:1 of the rails", window, w, r)
		}
	}
	if r := w[0] / w[1]; math.Abs(r-4) > 0.04 {
		t.Fatalf("weights %v: ratio %.3f, want 4", w, r)
	}
}

// The scheduler may round a small share up to min_stripe: the rate is
// what the stripe really carried.
func TestAdaptiveMeasuresTheBytesTheStripeCarried(t *testing.T) {
	pol := policy(t, "adaptive_striping", map[string]string{"alpha": "1"})
	s, _ := pol.Setup(rails(1, 1))
	w := s.Weights
	w[0], w[1] = 99, 1
	pol.current[1] = append([]float64(nil), w...)
	// 1 MiB cut 99:1 would give rail 1 10 KiB; it got 16 KiB, and both
	// rails run at 1 GB/s (a byte a nanosecond).
	evs := []core.SchedEvent{
		{Kind: core.SchedStripeDone, Peer: 1, Sub: 0, Msg: 1, Bytes: 1<<20 - 16<<10, Time: (1<<20 - 16<<10) * time.Nanosecond},
		{Kind: core.SchedStripeDone, Peer: 1, Sub: 1, Msg: 1, Bytes: 16 << 10, Last: true, Time: 16 << 10 * time.Nanosecond},
	}
	apply(w, pol.Observe(evs, nil))
	if math.Abs(w[0]-50) > 0.5 {
		t.Fatalf("two equal rails, weights %v, want 50:50 (alpha 1)", w)
	}
}

// Static weights are for the peers reached over that many rails; a peer
// reached by one subchannel (this rank through btl self, a local peer
// through shared memory) needs none, and a stack with weights must still
// open.
func TestStaticWeightsLeaveOneSubchannelPeersAlone(t *testing.T) {
	pol := policy(t, "weighted_striping", map[string]string{"weights": "4,1"})
	s, err := pol.Setup(rails(20e9))
	if err != nil {
		t.Fatalf("a one-subchannel peer with weights [4, 1]: %v", err)
	}
	if len(s.Weights) != 1 || s.Weights[0] != 100 {
		t.Fatalf("weights %v, want [100]", s.Weights)
	}
	if s, err = pol.Setup(rails(1e9, 250e6)); err != nil || s.Weights[0] != 80 || s.Weights[1] != 20 {
		t.Fatalf("two rails: weights %v, %v; want 80:20", s.Weights, err)
	}
	if _, err := pol.Setup(rails(1, 1, 1)); err == nil {
		t.Fatal("three subchannels took two weights")
	}
}

// Eq. 4, not Eq. 3: α keeps (1−α) of the history. From 50:50, one message
// whose stripes ran at 4:1 moves the weights to 0.5·50 + 0.5·80 = 65 and
// 0.5·50 + 0.5·20 = 35 with α = 0.5; Eq. 3 (no history) would jump to
// 80:20 at once.
func TestAdaptiveKeepsHistoryByAlpha(t *testing.T) {
	for _, c := range []struct {
		alpha string
		want  float64
	}{{"0.5", 65}, {"0.25", 57.5}, {"1", 80}} {
		pol := policy(t, "adaptive_striping", map[string]string{"alpha": c.alpha})
		s, err := pol.Setup(rails(1, 1))
		if err != nil {
			t.Fatal(err)
		}
		w := s.Weights
		apply(w, pol.Observe(stripe(1, 1<<20, w, []float64{4e9, 1e9}), nil))
		if math.Abs(w[0]-c.want) > 1e-9 || math.Abs(w[1]-(100-c.want)) > 1e-9 {
			t.Errorf("alpha %s: weights %v after one message at 4:1, want %v:%v (Eq. 4)", c.alpha, w, c.want, 100-c.want)
		}
	}
}
