package multirail

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/experiment"
)

// Every stack the experiments run is one `gobtl config check` accepts.
func TestTheExperimentsStacksLoad(t *testing.T) {
	var stacks []string
	// A "gobtl" that fails every job: each step stops at its first run,
	// whose error carries the stack.
	jobs, err := experiment.NewLauncher("/bin/false")
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Close()
	x := &exp{Options: Options{Tag: "t"}, Env: &experiment.Env{Ctx: context.Background(), Out: &bytes.Buffer{}, Jobs: jobs}}
	for _, f := range []func() error{x.equal, x.fourByOne, x.window} {
		err := f()
		_, stack, ok := strings.Cut(fmt.Sprint(err), "stack:\n")
		stack, _, ok2 := strings.Cut(stack, "\ncommand: ")
		if !ok || !ok2 {
			t.Fatalf("a failed job's error does not carry its stack: %v", err)
		}
		stacks = append(stacks, stack)
	}
	pol, params := striping("adaptive_striping", nil)
	stacks = append(stacks,
		Stack{Rails: []Rail{{Name: "hca0", Rate: rate4x}, {Name: "hca1", Rate: rate4x, Link: "l-%r"}}, Policy: pol, Params: params}.HCL(),
		Stack{Rails: []Rail{{Name: "fast"}, {Name: "slow", Delay: windowDelay}}, Policy: "window_round_robin",
			Params: map[string]string{"small": `"window_round_robin"`, "window": "8"}}.HCL(),
		Stack{Rails: []Rail{{Name: "x4", Rate: rate4x}, {Name: "x1", Rate: rate1x}}, Policy: "weighted_striping",
			Params: map[string]string{"weights": "[4, 1]"}}.HCL(),
	)
	if len(stacks) < 6 {
		t.Fatalf("only %d stacks", len(stacks))
	}
	for i, s := range stacks {
		if _, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: fmt.Sprintf("stack%d.hcl", i), Bytes: []byte(s)}); diags.HasErrors() {
			t.Errorf("stack %d:\n%s\n%v", i, s, diags)
		}
	}
}

// The stream runs between two goroutine ranks and reports both sides.
func TestTheStreamReportsBandwidthWeightsAndCounters(t *testing.T) {
	var out bytes.Buffer
	stack := Stack{Rails: []Rail{{Name: "a"}, {Name: "b"}}, Policy: "adaptive_striping"}.HCL()
	stack = strings.ReplaceAll(stack, `btl "ib"`, `btl "inproc"`)
	stack = strings.ReplaceAll(stack, "  device = \"a\"\n  port   = 1\n", "")
	stack = strings.ReplaceAll(stack, "  device = \"b\"\n  port   = 1\n", "")
	cfgFile := t.TempDir() + "/s.hcl"
	if err := os.WriteFile(cfgFile, []byte(stack), 0o644); err != nil {
		t.Fatal(err)
	}
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{cfgFile}}, func(c *gobtl.Comm) error {
		var w bytes.Buffer
		err := Stream(c, StreamOptions{Size: 256 << 10, Window: 4, Count: 40, Interval: time.Nanosecond}, &w)
		if c.Rank() == 0 {
			out = w
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var rep StreamReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v in %q", err, out.String())
	}
	if rep.Messages != 40 || rep.Size != 256<<10 || !(rep.MBps > 0) || rep.End <= rep.Start {
		t.Fatalf("report %+v", rep)
	}
	for r := 0; r < 2; r++ {
		if len(rep.Samples[r]) != 10 {
			t.Fatalf("rank %d: %d samples of 10 windows", r, len(rep.Samples[r]))
		}
		if w := rep.Samples[r][0].Weights; len(w) != 2 || math.Abs(w[0]+w[1]-100) > 1e-6 {
			t.Fatalf("rank %d weights %v", r, w)
		}
		if _, ok := rep.Counters[r]["pml.out_of_order"]; !ok {
			t.Fatalf("rank %d: no pml.out_of_order among %d counters", r, len(rep.Counters[r]))
		}
	}
	if !(rep.Samples[0][0].MBps > 0) {
		t.Fatalf("rank 0's samples carry no bandwidth: %+v", rep.Samples[0][0])
	}
}

// A stream that is out of time before its first window sends nothing, but
// still marks its start for the load experiment and reports; one given
// neither a count nor a duration is refused.
func TestAStreamOutOfTimeSendsNothingButMarksItsStart(t *testing.T) {
	started := t.TempDir() + "/started"
	var out bytes.Buffer
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{}, func(c *gobtl.Comm) error {
		if err := Stream(c, StreamOptions{Size: 8}, io.Discard); err == nil || !strings.Contains(err.Error(), "give a count or a duration") {
			return fmt.Errorf("no count, no duration: %v", err)
		}
		var w bytes.Buffer
		err := Stream(c, StreamOptions{Size: 8, Duration: time.Nanosecond, Started: started}, &w)
		if c.Rank() == 0 {
			out = w
		} else if w.Len() > 0 {
			return fmt.Errorf("rank %d printed %q", c.Rank(), w.String())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var rep StreamReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v in %q", err, out.String())
	}
	if rep.Messages != 0 || rep.MBps != 0 || rep.Size != 8 || len(rep.Samples[0])+len(rep.Samples[1]) != 0 || rep.Counters[1] == nil {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(started); err != nil {
		t.Fatalf("no start mark: %v", err)
	}
}

// The load run's phases and load marks come from the two jobs' clocks.
func TestALoadRunSplitsIntoBeforeDuringAndAfter(t *testing.T) {
	ms := int64(time.Millisecond)
	r := loadRun{policy: "adaptive_striping"}
	r.main.Start = 1000 * ms
	r.load.Start, r.load.End = r.main.Start+1000*ms, r.main.Start+2000*ms
	for i := 1; i <= 40; i++ {
		at := r.main.Start + int64(i)*100*ms
		bw := 2000.0
		if at > r.load.Start && at <= r.load.End {
			bw = 1000
		}
		r.main.Samples[0] = append(r.main.Samples[0], Sample{Unix: at, MBps: bw, Weights: []float64{50, 50}})
		r.main.Samples[1] = append(r.main.Samples[1], Sample{Unix: at - ms, Weights: []float64{float64(50 + i), float64(50 - i)}})
	}
	pts := r.points()
	if len(pts) != 40 || pts[9].loaded || !pts[10].loaded || !pts[19].loaded || pts[20].loaded {
		t.Fatalf("load marks wrong: %+v", pts[8:12])
	}
	if pts[0].weights[0] != 51 {
		t.Fatalf("a sample takes the receiver's latest weights, got %v", pts[0].weights)
	}
	b, d, a := r.phases()
	if b != 2000 || d != 1000 || a != 2000 {
		t.Fatalf("phases %v %v %v", b, d, a)
	}
}

// Fig 20's table has one row per 100 ms tick: samples taken after a
// window of messages, not exactly 100 ms apart, never print one time
// twice.
func TestTheLoadTableHasOneRowPerInterval(t *testing.T) {
	ms := int64(time.Millisecond)
	mk := func(policy string, at []int64) loadRun {
		r := loadRun{policy: policy}
		r.main.Start = 1000 * ms
		r.load.Start, r.load.End = r.main.Start+200*ms, r.main.Start+400*ms
		for _, a := range at {
			r.main.Samples[0] = append(r.main.Samples[0], Sample{Unix: r.main.Start + a*ms, MBps: 1000, Weights: []float64{50, 50}})
		}
		return r
	}
	var out bytes.Buffer
	x := &exp{Env: &experiment.Env{Out: &out}}
	x.printLoad([]loadRun{mk("even_striping", []int64{104, 190, 230, 305, 420, 510}), mk("adaptive_striping", []int64{120, 199, 250, 290, 398, 500})})
	seen := map[string]bool{}
	rows := 0
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !strings.Contains(l, "|") {
			continue
		}
		if _, err := fmt.Sscanf(f[0], "%f", new(float64)); err != nil {
			continue
		}
		if seen[f[0]] {
			t.Fatalf("time %s printed twice:\n%s", f[0], out.String())
		}
		seen[f[0]] = true
		rows++
	}
	if rows != 5 {
		t.Fatalf("%d rows, want the 5 ticks 0.1-0.5 s:\n%s", rows, out.String())
	}
}
