package bench_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/internal/topo"
)

func TestInitReportsEveryRanksStartUp(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	var rep *bench.Report
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{}, func(c *gobtl.Comm) error {
		o := bench.Options{}
		if c.Rank() == 0 {
			o.Out = &out
		}
		r, err := bench.Run(c, "init", o)
		if c.Rank() == 0 {
			mu.Lock()
			rep = r
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Size != 3 {
		t.Fatalf("rows %v", rep.Rows)
	}
	// Ranks in one process run where the process does.
	if len(rep.RankBindings) != 3 || rep.RankBindings[2] != topo.Self().String() || !strings.Contains(out.String(), "# rank 2: "+topo.Self().String()) {
		t.Fatalf("bindings %q\n%s", rep.RankBindings, out.String())
	}
	get := func(name string) float64 {
		v, ok := rep.Rows[0].Get(name)
		if !ok {
			t.Fatalf("no field %s in %v", name, rep.Rows[0])
		}
		return v
	}
	prev := 0.0
	for _, phase := range []string{"called", "bootstrap", "btls", "exchange", "done"} {
		lo, mid, hi := get(phase+"_min_ms"), get(phase+"_median_ms"), get(phase+"_max_ms")
		if lo > mid || mid > hi || lo < prev || hi <= 0 {
			t.Errorf("%s: min %v, median %v, max %v after a phase that began at %v", phase, lo, mid, hi, prev)
		}
		prev = lo
	}
	if get("init_max_ms") > get("done_max_ms") {
		t.Error("Init took longer than the program had run")
	}
	if !strings.Contains(out.String(), "Init itself") {
		t.Errorf("the table:\n%s", out.String())
	}
}
