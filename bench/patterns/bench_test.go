package patterns_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench"
	_ "github.com/gobtl/gobtl/bench/patterns"
)

// runBench runs a benchmark on n goroutine ranks and returns rank 0's
// output.
func runBench(t *testing.T, n int, name string, o bench.Options) string {
	t.Helper()
	var out bytes.Buffer
	err := gobtl.RunLocal(context.Background(), n, gobtl.Options{}, func(c *gobtl.Comm) error {
		o := o
		if c.Rank() == 0 {
			o.Out = &out
		}
		_, err := bench.Run(c, name, o)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestAPatternReportsEveryRanksCountersAndMessages(t *testing.T) {
	out := runBench(t, 8, "lu", bench.Options{Iters: 2, Scale: 0.01, JSON: true, Config: map[string]any{"stack": "test"}})
	var rep struct {
		Bench        string
		Ranks        int
		Config       map[string]any
		Rows         []map[string]float64
		Counters     map[string]any
		RankCounters []map[string]any `json:"rank_counters"`
		RankMsgs     [][]int64        `json:"rank_msgs"`
		RankBytes    [][]int64        `json:"rank_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Bench != "lu" || rep.Ranks != 8 || len(rep.Rows) != 1 || rep.Counters == nil {
		t.Fatalf("report: %s", out)
	}
	if rep.Config["stack"] != "test" || rep.Config["iters"] != 2.0 || rep.Config["scale"] != 0.01 || rep.Config["compute"] != "2µs" {
		t.Errorf("config %v", rep.Config)
	}
	row := rep.Rows[0]
	// The package doc: LU sends 1260T + 88 messages at 8
	// ranks, over 20 neighbour connections and 8 allreduce-only ones.
	if row["msgs"] != 1260*2+88 || row["conns"] != 28 || row["iters"] != 2 || row["time_us"] <= 0 || row["time_mean_us"] > row["time_us"] {
		t.Errorf("row %v", row)
	}
	if len(rep.RankMsgs) != 8 || len(rep.RankBytes) != 8 || len(rep.RankCounters) != 8 {
		t.Fatalf("%d×? messages, %d×? bytes, %d counter sets; want 8 of each", len(rep.RankMsgs), len(rep.RankBytes), len(rep.RankCounters))
	}
	var msgs int64
	for s := range 8 {
		for d := range 8 {
			msgs += rep.RankMsgs[s][d]
			if (rep.RankMsgs[s][d] > 0) != (rep.RankBytes[s][d] > 0) {
				t.Errorf("rank %d → %d: %d messages, %d bytes", s, d, rep.RankMsgs[s][d], rep.RankBytes[s][d])
			}
		}
		// Every rank's own counters, taken after its part: its pml sent
		// at least the pattern's bytes.
		var sent int64
		for _, b := range rep.RankBytes[s] {
			sent += b
		}
		if got, ok := rep.RankCounters[s]["pml.bytes_sent"].(float64); !ok || int64(got) < sent {
			t.Errorf("rank %d: pml.bytes_sent %v, the pattern sent %d bytes", s, rep.RankCounters[s]["pml.bytes_sent"], sent)
		}
	}
	if msgs != int64(row["msgs"]) {
		t.Errorf("the matrix holds %d messages, the row says %v", msgs, row["msgs"])
	}
}

func TestAPatternPrintsATableWithTheMessageMatrix(t *testing.T) {
	out := runBench(t, 4, "mg", bench.Options{Iters: 1, Scale: 0.01})
	for _, want := range []string{"# gobtl mg: NPB MG", "Msgs/conn", "# application messages, rank (row) to rank (column)", "pml.eager_sends"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestAPatternRefusesSizes(t *testing.T) {
	err := gobtl.RunLocal(context.Background(), 1, gobtl.Options{}, func(c *gobtl.Comm) error {
		_, err := bench.Run(c, "ft", bench.Options{Sizes: []int{8}})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "not sizes") {
		t.Errorf("got %v", err)
	}
}

func TestTheSuiteListsThePatterns(t *testing.T) {
	names := strings.Join(bench.Names(), " ")
	for _, p := range []string{"is", "ft", "cg", "mg", "lu", "bt", "sp"} {
		if !strings.Contains(" "+names+" ", " "+p+" ") || bench.Doc(p) == "" {
			t.Errorf("%s missing from %q or undocumented", p, names)
		}
	}
}

func TestMessagesPerConnectionLeaveOutARanksMessagesToItself(t *testing.T) {
	// CG at 8 ranks sends 1472T messages; its 4 diagonal ranks send 26T
	// of them to themselves; 20 connections carry the rest.
	out := runBench(t, 8, "cg", bench.Options{Iters: 1, Scale: 0.01, JSON: true})
	var rep struct{ Rows []map[string]float64 }
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if row := rep.Rows[0]; row["msgs"] != 1472 || row["conns"] != 20 || row["msgs_per_conn"] != float64(1472-4*26)/20 {
		t.Errorf("row %v", row)
	}
}
