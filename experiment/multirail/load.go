package multirail

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/gobtl/gobtl/experiment"
)

// loadRun is one run of the load experiment: the measured job and the
// job that loaded its second rail.
type loadRun struct {
	policy string
	main   StreamReport
	load   StreamReport
}

// load: a long bandwidth run over two 1GB/s rails; a while into it a
// second job streams over the second rail's link (§6.3, Fig. 20).
func (x *exp) load() error {
	total, on, length := 8*time.Second, 2*time.Second, 3*time.Second
	if x.Quick {
		total, on, length = 3200*time.Millisecond, 700*time.Millisecond, time.Second // 0.7 s of "after" past the 0.5 s the weights get to return
	}
	link := fmt.Sprintf("gobtl-mr-%s-rail1-node%%r", x.Tag)
	rails := []Rail{{Name: "hca0", Rate: rate4x}, {Name: "hca1", Rate: rate4x, Link: link}}
	loader := Stack{Rails: []Rail{{Name: "hca1", Rate: rate4x, Link: link}}}
	stream := func(d time.Duration) StreamOptions {
		return StreamOptions{Size: 1 << 20, Window: 8, Duration: d, Interval: 100 * time.Millisecond}
	}
	var runs []loadRun
	for _, policy := range []string{"even_striping", "adaptive_striping"} {
		pol, params := striping(policy, nil)
		st := Stack{Rails: rails, Policy: pol, Params: params}
		x.Begin("multirail: load, %s, %v with a second job on rail 1 from %v for %v", policy, total, on, length)
		type result struct {
			rep StreamReport
			err error
		}
		// The second job starts `on` after the measured stream has begun,
		// not after its launch: a launch on a loaded machine can take
		// longer than `on`, and the table would have no "before".
		o := stream(total)
		o.Started = filepath.Join(os.TempDir(), fmt.Sprintf("gobtl-mr-%s-%s-started", x.Tag, policy))
		os.Remove(o.Started)
		done := make(chan result, 1)
		go func() {
			rep, err := x.stream(st, o)
			done <- result{rep, err}
		}()
		tick := time.NewTicker(10 * time.Millisecond)
		for started := false; !started; {
			select {
			case <-tick.C:
				_, err := os.Stat(o.Started)
				started = err == nil
			case r := <-done:
				tick.Stop()
				return fmt.Errorf("the measured job ended before the load started: %v", r.err)
			}
		}
		tick.Stop()
		os.Remove(o.Started)
		select {
		case <-time.After(on):
		case r := <-done:
			return fmt.Errorf("the measured job ended before the load started: %v", r.err)
		}
		lrep, lerr := x.stream(loader, stream(length))
		r := <-done
		if r.err != nil {
			return fmt.Errorf("%s: %w", policy, r.err)
		}
		if lerr != nil {
			return fmt.Errorf("the loading job: %w", lerr)
		}
		runs = append(runs, loadRun{policy: policy, main: r.rep, load: lrep})
	}
	x.printLoad(runs)
	return x.plotLoad(runs)
}

// point is one 100 ms sample of a load run, on the measured job's clock.
type point struct {
	t       float64 // seconds since the measured job started
	mbps    float64
	weights []float64
	loaded  bool
}

func (r loadRun) points() []point {
	var pts []point
	recv := r.main.Samples[1]
	for _, s := range r.main.Samples[0] {
		p := point{t: float64(s.Unix-r.main.Start) / 1e9, mbps: s.MBps, weights: s.Weights}
		// The receiver stripes the reads (rdma_read): its weights are the
		// ones that move. Take its latest sample at this moment.
		i := sort.Search(len(recv), func(i int) bool { return recv[i].Unix > s.Unix })
		if i > 0 {
			p.weights = recv[i-1].Weights
		}
		p.loaded = s.Unix > r.load.Start && s.Unix-int64(100*time.Millisecond) < r.load.End
		pts = append(pts, p)
	}
	return pts
}

// loadWindow is when the load ran, in seconds on the measured job's clock.
func (r loadRun) loadWindow() (float64, float64) {
	return float64(r.load.Start-r.main.Start) / 1e9, float64(r.load.End-r.main.Start) / 1e9
}

// phases averages a run's bandwidth before, during and after the load
// (after: from 0.5 s past its end, once the weights had time to return).
func (r loadRun) phases() (before, during, after float64) {
	on, off := r.loadWindow()
	var sb, sd, sa, nb, nd, na float64
	for _, p := range r.points() {
		switch {
		case p.t < on:
			sb, nb = sb+p.mbps, nb+1
		case p.t > on && p.t <= off:
			sd, nd = sd+p.mbps, nd+1
		case p.t > off+0.5:
			sa, na = sa+p.mbps, na+1
		}
	}
	avg := func(s, n float64) float64 {
		if n == 0 {
			return math.NaN()
		}
		return s / n
	}
	return avg(sb, nb), avg(sd, nd), avg(sa, na)
}

func (x *exp) printLoad(runs []loadRun) {
	w := x.Out
	even, adaptive := runs[0], runs[1]
	fmt.Fprintf(w, "== load: two 1GB/s rails; a second job streams 1MiB messages over rail 1's link for a while (Fig. 20)\n")
	fmt.Fprintf(w, "The second job's ports name the same softrc link as rail 1 of the measured job (one token bucket per node\n")
	fmt.Fprintf(w, "in /dev/shm), so the two jobs share that rail's 1GB/s as two programs share an HCA port. It also\n")
	fmt.Fprintf(w, "takes CPU: four processes on %d CPUs while it runs.\n", runtime.NumCPU())
	for _, r := range runs {
		on, off := r.loadWindow()
		fmt.Fprintf(w, "%s: second job from %.2fs to %.2fs, it moved %.0f MB/s\n", r.policy, on, off, r.load.MBps)
	}
	fmt.Fprintf(w, "* marks a sample of a run taken while that run's second job was streaming\n")
	fmt.Fprintf(w, "%6s | %12s | %12s %16s\n", "t (s)", "even (MB/s)", "adaptive", "weights 0:1")
	// One row per 100 ms tick of the runs' clocks. A stream samples after
	// a window of messages, so its samples are not exactly 100 ms apart:
	// each goes to its nearest tick, and two of one run at one tick are
	// averaged (printed apart, they showed one time twice).
	type cell struct {
		p  point
		n  int
		ok bool
	}
	bins := map[int][2]cell{}
	last := 0
	for k, pts := range [][]point{even.points(), adaptive.points()} {
		for _, p := range pts {
			i := int(math.Round(p.t * 10))
			b := bins[i]
			c := &b[k]
			if c.ok {
				p.mbps = (c.p.mbps*float64(c.n) + p.mbps) / float64(c.n+1)
				p.loaded = p.loaded || c.p.loaded
			}
			c.p, c.n, c.ok = p, c.n+1, true
			bins[i] = b
			last = max(last, i)
		}
	}
	for i := 0; i <= last; i++ {
		b, ok := bins[i]
		if !ok {
			continue
		}
		ev, ad, wt := "- ", "- ", ""
		mark := map[bool]string{true: "*", false: " "}
		if b[0].ok {
			ev = fmt.Sprintf("%.0f", b[0].p.mbps) + mark[b[0].p.loaded]
		}
		if b[1].ok {
			ad, wt = fmt.Sprintf("%.0f", b[1].p.mbps)+mark[b[1].p.loaded], fmtWeights(b[1].p.weights)
		}
		fmt.Fprintf(w, "%6.1f | %12s | %12s %16s\n", float64(i)/10, ev, ad, wt)
	}
	eb, ed, ea := even.phases()
	ab, ad, aa := adaptive.phases()
	fmt.Fprintf(w, "mean MB/s     before   during    after\n")
	fmt.Fprintf(w, "even        %8.0f %8.0f %8.0f\n", eb, ed, ea)
	fmt.Fprintf(w, "adaptive    %8.0f %8.0f %8.0f\n", ab, ad, aa)
	const table = "Fig 20 a loaded rail"
	fmt.Fprintf(w, "during the load adaptive/even = %.2f: %s\n", ratio(ad, ed),
		x.Check(table, "during the load", "with a second job on one rail, adaptive beats even striping (adaptive / even)", ratio(ad, ed), experiment.AtLeast(1.05)))
	const back = "adaptive is back at its full bandwidth afterwards (after / before)"
	if math.IsNaN(ab) {
		// The second job is started a fixed time after the measured one
		// is launched; a launch slower than that leaves no sample before.
		fmt.Fprintf(w, "after it adaptive/before: %s\n", x.Unshown(table, "after the load", back,
			"the measured job's first sample came after the second job had started (a slow launch on a loaded machine)"))
	} else {
		fmt.Fprintf(w, "after it adaptive/before = %.2f: %s\n", ratio(aa, ab), x.Check(table, "after the load", back, ratio(aa, ab), experiment.AtLeast(0.85)))
	}
	x.Record(table, map[string]any{"even": []float64{eb, ed, ea}, "adaptive": []float64{ab, ad, aa}})
	fmt.Fprintf(w, "paper (Fig. 20, 1 s samples): both comparable at first; with the second program on HCA 2 adaptive beats even; afterwards adaptive is back at peak\n\n")
}
