package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
)

// schedInfos: four peers whose virtual channels have one to four
// subchannels, mixing 4x (1 GB/s) and 1x (250 MB/s) rails as in seed 001
// §6.
func schedInfos() []core.SchedInfo {
	rails := []core.SubchannelInfo{
		{Name: "mlx0:1", Bandwidth: 1e9, Latency: 2 * time.Microsecond},
		{Name: "mlx1:1", Bandwidth: 0.25e9, Latency: 3 * time.Microsecond},
		{Name: "mlx0:2", Bandwidth: 1e9, Latency: 2 * time.Microsecond},
		{Name: "mlx1:2", Bandwidth: 0.5e9, Latency: 4 * time.Microsecond},
	}
	var infos []core.SchedInfo
	for p := 0; p < 4; p++ {
		infos = append(infos, core.SchedInfo{Peer: p, Subchannels: rails[:p+1], LocalRank: 0, LocalRanks: 2})
	}
	return infos
}

type schedModel struct{}

func (schedModel) run(h *harness) []Result {
	infos := schedInfos()
	var st *schedState
	setup := func(p *plugins.Policy) error {
		st = &schedState{infos: infos, setups: map[int32]core.SchedSetup{}, weights: map[int32][]float64{}}
		for _, info := range infos {
			s, err := p.Scheduler().Setup(info)
			if err != nil {
				return fmt.Errorf("peer %d (%d subchannels): %w", info.Peer, len(info.Subchannels), err)
			}
			if err := checkSchedSetup(info, s); err != nil {
				return fmt.Errorf("peer %d (%d subchannels): %w", info.Peer, len(info.Subchannels), err)
			}
			st.setups[int32(info.Peer)] = s
			st.weights[int32(info.Peer)] = append([]float64(nil), s.Weights...)
		}
		return nil
	}
	var res []Result
	func() {
		p, err := h.open(true)
		if err != nil {
			res = append(res, Result{Name: "setup", Err: err})
			return
		}
		defer p.Close()
		if err := setup(p); err != nil {
			if f := failure(p); f != nil {
				err = f
			}
			res = append(res, Result{Name: "setup", Err: err})
			return
		}
		s := st.setups[int32(len(infos)-1)]
		res = append(res, Result{Name: "setup", Detail: fmt.Sprintf("%d peers; small %v, large %v above %d bytes", len(infos), s.Small, s.Large, s.StripeThreshold)})
		n, err := stream(h, p, p.Scheduler(), st, h.o.Events)
		res = append(res, Result{Name: "stream", Err: err,
			Detail: fmt.Sprintf("%d stripe events, %d decisions within the invariants; every batch answered within %v", h.o.Events, n, h.o.Deadline)})
	}()
	if st == nil || len(res) == 0 || res[0].Err != nil {
		return res
	}
	feed := func(p *plugins.Policy, n int) { p.Scheduler().Observe(st.events(h.rng, n), nil) }
	return append(res, crashAndRestart(h, setup, feed)...)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func checkSchedSetup(info core.SchedInfo, s core.SchedSetup) error {
	valid := func(m core.SchedMode) bool { return m >= core.SchedBinding && m <= core.SchedAdaptiveStriping }
	if !valid(s.Small) || s.Small.Striping() {
		return fmt.Errorf("small-message mode %d (%v): must be a multiplexing mode", s.Small, s.Small)
	}
	if !valid(s.Large) {
		return fmt.Errorf("large-message mode %d is unknown", s.Large)
	}
	n := len(info.Subchannels)
	if len(s.Weights) != n {
		return fmt.Errorf("%d weights for %d subchannels", len(s.Weights), n)
	}
	sum := 0.0
	for i, w := range s.Weights {
		if !finite(w) || w < 0 {
			return fmt.Errorf("weight %d is %v: weights are finite and non-negative", i, w)
		}
		sum += w
	}
	if !finite(s.TotalWeight) || s.TotalWeight <= 0 {
		return fmt.Errorf("TotalWeight %v", s.TotalWeight)
	}
	if math.Abs(sum-s.TotalWeight) > 1e-9*s.TotalWeight {
		return fmt.Errorf("weights sum to %v, not TotalWeight %v: not normalised", sum, s.TotalWeight)
	}
	if s.Bind < 0 || s.Bind >= n {
		return fmt.Errorf("binds to subchannel %d of %d", s.Bind, n)
	}
	if (s.Small == core.SchedWindowRoundRobin || s.Large == core.SchedWindowRoundRobin) && s.Window < 1 {
		return fmt.Errorf("window round robin with window %d", s.Window)
	}
	if s.StripeThreshold < 0 || s.MinStripe < 0 {
		return fmt.Errorf("stripe threshold %d, min stripe %d: negative", s.StripeThreshold, s.MinStripe)
	}
	return nil
}

// schedState models the communication scheduler: per peer, the weights
// the decisions set; messages are striped by them and every stripe's
// delivery time is fed back, as the completion filter does.
type schedState struct {
	infos   []core.SchedInfo
	setups  map[int32]core.SchedSetup
	weights map[int32][]float64
	msg     uint64
	rr      int
}

func (st *schedState) events(rng *rand.Rand, n int) []core.SchedEvent {
	var es []core.SchedEvent
	for len(es) < n {
		info := st.infos[rng.IntN(len(st.infos))]
		peer := int32(info.Peer)
		s := st.setups[peer]
		size := int64(math.Exp(rng.Float64()*math.Log(8<<20))) + 64
		st.msg++
		subs := info.Subchannels
		noise := func() float64 { return 0.8 + 0.4*rng.Float64() }
		stripe := func(sub int, bytes int64, last bool) core.SchedEvent {
			t := subs[sub].Latency + time.Duration(float64(bytes)/subs[sub].Bandwidth*1e9*noise())
			return core.SchedEvent{Kind: core.SchedStripeDone, Peer: peer, Sub: int32(sub), Last: last, Msg: st.msg, Bytes: bytes, Time: t}
		}
		if s.Large.Striping() && size >= s.StripeThreshold && len(subs) > 1 {
			w := st.weights[peer]
			total := 0.0
			for _, x := range w {
				total += x
			}
			var parts []core.SchedEvent
			left := size
			for i := range subs {
				b := int64(float64(size) * w[i] / total)
				if i == len(subs)-1 {
					b = left
				}
				if b <= 0 || b < s.MinStripe && i != len(subs)-1 {
					continue
				}
				left -= b
				parts = append(parts, stripe(i, b, false))
			}
			if len(parts) == 0 {
				parts = append(parts, stripe(0, size, false))
			}
			parts[len(parts)-1].Last = true
			es = append(es, parts...)
		} else {
			st.rr++
			es = append(es, stripe(st.rr%len(subs), size, true))
		}
	}
	return es
}

func (st *schedState) apply(ds []core.SchedDecision, v *violations) {
	touched := map[int32]bool{}
	for _, d := range ds {
		if d.Kind != core.SchedSetWeight {
			v.add("unknown sched decision kind %d", d.Kind)
			continue
		}
		w, ok := st.weights[d.Peer]
		if !ok {
			v.add("weight for peer %d, which was never set up", d.Peer)
			continue
		}
		if d.Sub < 0 || int(d.Sub) >= len(w) {
			v.add("weight for subchannel %d of peer %d, which has %d", d.Sub, d.Peer, len(w))
			continue
		}
		if !finite(d.Weight) || d.Weight < 0 {
			v.add("weight %v for peer %d subchannel %d: weights are finite and non-negative", d.Weight, d.Peer, d.Sub)
			continue
		}
		w[d.Sub] = d.Weight
		touched[d.Peer] = true
	}
	for peer := range touched {
		sum := 0.0
		for _, x := range st.weights[peer] {
			sum += x
		}
		if sum <= 0 {
			v.add("the weights of peer %d sum to %v: they cannot be normalised", peer, sum)
			for i := range st.weights[peer] {
				st.weights[peer][i] = 1
			}
		}
	}
}
