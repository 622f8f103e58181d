package pml

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/sched"
)

func schedPolicy(t tester, name string, set map[string]string) core.Scheduler {
	p := core.MustParams(sched.Params(name))
	for k, v := range set {
		if err := p.SetText(k, v); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := sched.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// Random mixes of sizes over 1–4 subchannels with random per-frame delays
// and every scheduling policy: every message arrives once, in order,
// intact; a striped message completes exactly once on both sides; the
// weights stay non-negative and sum to the total.
func TestMultirailRandomMixes(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nsub := rapid.IntRange(1, 4).Draw(rt, "subchannels")
		policyName := rapid.SampledFrom(sched.Names).Draw(rt, "policy")
		proto := rapid.SampledFrom([]Protocol{ProtoRead, ProtoWrite, ProtoReadAsync}).Draw(rt, "proto")
		rails := make([]inproc.RailOptions, nsub)
		for i := range rails {
			rails[i].MaxRDMA = int64(rapid.SampledFrom([]int{0, 32 << 10}).Draw(rt, "maxrdma"))
		}
		w := newWorld(rt, 2, rails, Options{Protocol: proto}, func(_ int, o *Options) {
			o.Scheduler = schedPolicy(rt, policyName, map[string]string{"stripe_threshold": "32KiB", "min_stripe": "4KiB", "window": "3"})
		})
		defer w.close()
		for i := 0; i < nsub; i++ {
			w.f.Jitter(i, time.Duration(rapid.IntRange(0, 200).Draw(rt, "jitter"))*time.Microsecond)
		}
		sizes := rapid.SliceOfN(rapid.SampledFrom([]int{0, 7, 4096, 5000, 40 << 10, 300 << 10, 1 << 20}), 1, 20).Draw(rt, "sizes")
		w.run(rt, func(c *Comm) error {
			if err := exchange(c, sizes); err != nil {
				return err
			}
			peer := 1 - c.Rank()
			ws := c.Weights(peer)
			var sum float64
			for _, v := range ws {
				if v < 0 || math.IsNaN(v) {
					return fmt.Errorf("weights %v", ws)
				}
				sum += v
			}
			if math.Abs(sum-100) > 1e-6 {
				return fmt.Errorf("weights %v sum to %v", ws, sum)
			}
			return nil
		})
		for _, c := range w.comms {
			// Exactly once: every request was recycled once, none is left
			// pending or referenced.
			c.e.mu.Lock()
			for _, r := range c.e.reqs {
				if r.refs != 0 || (!r.done && r.gen != 0 && !r.released) {
					c.e.mu.Unlock()
					rt.Fatalf("rank %d: request left behind: done %v refs %d rdma %v", c.Rank(), r.done, r.refs, r.x)
				}
			}
			c.e.mu.Unlock()
		}
	})
}

func TestStripingUsesEverySubchannel(t *testing.T) {
	w := newWorld(t, 2, []inproc.RailOptions{{}, {}, {}}, Options{}, func(_ int, o *Options) { o.Scheduler = schedPolicy(t, "even_striping", nil) })
	w.run(t, sendPattern(3<<20, 1))
	if n := w.comms[1].Metrics().Counter("pml.stripes").Load(); n != 3 {
		t.Fatalf("receiver issued %d stripes for a 3 MiB message over 3 rails, want 3", n)
	}
}

// The plumbing from the completion filter to the policy and back: rail 1
// completes every operation 10 ms late, so its measured stripe times are
// longer however loaded the machine is, and adaptive striping must move
// weight to rail 0. (How fast Eq. 4 converges is tested, deterministically,
// in policies/sched.)
func TestAdaptiveStripingLearnsUnequalRails(t *testing.T) {
	w := newWorld(t, 2, []inproc.RailOptions{{}, {}}, Options{}, func(_ int, o *Options) {
		o.Scheduler = schedPolicy(t, "adaptive_striping", map[string]string{"alpha": "0.5"})
	})
	w.f.Delay(1, 0, 1, 10*time.Millisecond, true)
	w.run(t, func(c *Comm) error {
		buf := make([]byte, 1<<20)
		for i := 0; i < 8; i++ {
			if c.Rank() == 0 {
				if err := c.Send(buf, 1, 0); err != nil {
					return err
				}
			} else if _, err := c.Recv(buf, 0, 0); err != nil {
				return err
			}
		}
		return nil
	})
	ws := w.comms[1].Weights(0) // the receiver reads, so it learns
	if ws[0] <= 1.5*ws[1] {
		t.Fatalf("weights %v: the slow rail keeps too much", ws)
	}
}

func TestSubchannelFailureMidMessageFailsTheRequest(t *testing.T) {
	for _, proto := range []Protocol{ProtoRead, ProtoWrite} {
		t.Run(proto.String(), func(t *testing.T) {
			w := newWorld(t, 2, []inproc.RailOptions{{}, {}}, Options{Protocol: proto, FinalizeTimeout: 100 * time.Millisecond},
				func(_ int, o *Options) { o.Scheduler = schedPolicy(t, "even_striping", nil) })
			w.noFinalize = true
			// Rail 1's operations take long enough to drop it mid-message:
			// 20 ms after both ranks have started it, whatever the load.
			w.f.Delay(1, 0, 1, 5*time.Second, true)
			var started sync.WaitGroup
			started.Add(2)
			go func() {
				started.Wait()
				time.Sleep(20 * time.Millisecond)
				w.f.Drop(1, 0, 1)
			}()
			w.run(t, func(c *Comm) error {
				buf := make([]byte, 4<<20)
				var r *Request
				var err error
				if c.Rank() == 0 {
					r, err = c.Isend(buf, 1, 0)
				} else {
					r, err = c.Irecv(buf, 0, 0)
				}
				started.Done()
				if err != nil {
					return err
				}
				_, err = c.Wait(r)
				if !errors.Is(err, core.ErrPeerLost) {
					return fmt.Errorf("striped %v over a failing subchannel: %v, want ErrPeerLost", proto, err)
				}
				return nil
			})
		})
	}
}

// A subchannel whose weight gives it less than min_stripe still gets a
// stripe of min_stripe, so that adaptive striping keeps timing it; only a
// message too short for every subchannel to get min_stripe leaves it out.
func TestATinyWeightStillGetsTheMinimumStripe(t *testing.T) {
	for _, tc := range []struct {
		size, stripes int
	}{
		{1 << 20, 2},  // 99:1 would give rail 1 10 KiB: it gets 16 KiB
		{24 << 10, 1}, // 24 KiB cannot give both rails 16 KiB
		{32 << 10, 2}, // exactly two minimum stripes
		{3 << 20, 2},  // 1% of 3 MiB is above the minimum
	} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			// No inline bytes in the START: the sizes are what is striped.
			w := newWorld(t, 2, []inproc.RailOptions{{}, {}}, Options{RndvEagerLimit: -1}, func(_ int, o *Options) {
				o.Scheduler = schedPolicy(t, "weighted_striping", map[string]string{"weights": "99,1", "stripe_threshold": "16KiB", "min_stripe": "16KiB"})
			})
			w.run(t, sendPattern(tc.size, 3))
			if n := w.comms[1].Metrics().Counter("pml.stripes").Load(); n != int64(tc.stripes) {
				t.Fatalf("%d bytes weighted 99:1 with a 16 KiB minimum: %d stripes, want %d", tc.size, n, tc.stripes)
			}
		})
	}
}

// plan never cuts a stripe below the minimum, covers the message exactly
// and follows the weights where the minimum allows.
func TestPlanCoversTheMessageWithStripesOfAtLeastTheMinimum(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.IntRange(1, maxSubchannels).Draw(rt, "subchannels")
		p := &peer{}
		for i := 0; i < k; i++ {
			p.subs = append(p.subs, &sub{idx: i, mod: &module{}, rdma: fakeRDMA{}})
		}
		s := &p.sched
		s.n = k
		s.cfg = core.SchedSetup{Large: core.SchedAdaptiveStriping, MinStripe: int64(rapid.IntRange(1, 64<<10).Draw(rt, "min")), TotalWeight: 100}
		ws := make([]float64, k)
		for i := range ws {
			ws[i] = rapid.Float64Range(0, 100).Draw(rt, "w")
		}
		ws[0] += 1e-3
		if !s.setWeights(ws) {
			rt.Fatalf("weights %v refused", ws)
		}
		n := rapid.IntRange(1, 8<<20).Draw(rt, "size")
		var out [maxSubchannels]span
		m := p.plan(nil, 0, 100, n, &out)
		if m < 1 || m > k {
			rt.Fatalf("%d spans", m)
		}
		at, used := 100, 0
		for _, sp := range out[:m] {
			if sp.off != at || sp.len <= 0 {
				rt.Fatalf("spans %v do not tile [100, %d)", out[:m], 100+n)
			}
			if m > 1 && sp.len < int(s.cfg.MinStripe) {
				rt.Fatalf("a %d-byte stripe under the %d minimum: %v", sp.len, s.cfg.MinStripe, out[:m])
			}
			if s.w[sp.sub.idx] == 0 {
				rt.Fatalf("a subchannel of weight 0 got a stripe: %v", s.w[:k])
			}
			at += sp.len
			used++
		}
		if at != 100+n {
			rt.Fatalf("spans %v cover %d bytes of %d", out[:m], at-100, n)
		}
		positive := 0
		for _, v := range s.w[:k] {
			if v > 0 {
				positive++
			}
		}
		if want := min(positive, n/int(s.cfg.MinStripe)); used < max(1, want) {
			rt.Fatalf("%d stripes for %d bytes over %d weighted subchannels (min %d)", used, n, positive, s.cfg.MinStripe)
		}
	})
}

// fakeRDMA marks a subchannel as RDMA-capable for plan; it never runs.
type fakeRDMA struct{}

func (fakeRDMA) Put(*core.RDMAOp) error { return nil }
func (fakeRDMA) Get(*core.RDMAOp) error { return nil }
