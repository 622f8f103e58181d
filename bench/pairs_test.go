package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench"
)

// pairsRun runs pairs on n goroutine ranks and returns rank 0's output.
func pairsRun(t *testing.T, n int, o bench.Options) string {
	t.Helper()
	var out bytes.Buffer
	err := gobtl.RunLocal(context.Background(), n, gobtl.Options{}, func(c *gobtl.Comm) error {
		o := o
		if c.Rank() == 0 {
			o.Out = &out
		}
		_, err := bench.Run(c, "pairs", o)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestPairsChecksEverySizeAndGathersEveryRanksCounters(t *testing.T) {
	sizes := []int{0, 1, 7, 8, 9, 4 << 10, 1 << 20}
	out := pairsRun(t, 3, bench.Options{Sizes: sizes, Iters: 2, JSON: true})
	var rep struct {
		Bench        string
		Ranks        int
		Rows         []map[string]float64
		RankCounters []map[string]any `json:"rank_counters"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Bench != "pairs" || rep.Ranks != 3 || len(rep.Rows) != len(sizes) || len(rep.RankCounters) != 3 {
		t.Fatalf("report: %s", out)
	}
	for i, row := range rep.Rows {
		if int(row["size"]) != sizes[i] || row["time_us"] <= 0 {
			t.Errorf("row %d: %v", i, row)
		}
	}
	for r, cs := range rep.RankCounters {
		if len(cs) == 0 {
			t.Errorf("rank %d reported no counters", r)
		}
	}
}

func TestPairsPrintsWhatEveryRankSent(t *testing.T) {
	out := pairsRun(t, 2, bench.Options{Sizes: []int{64}, Iters: 1})
	if !strings.Contains(out, "# what each rank sent") || !strings.Contains(out, "\n64 ") {
		t.Errorf("table:\n%s", out)
	}
}
