package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench"
)

// report runs a benchmark on n goroutine ranks (rdma_read, so that the
// receiver does the RDMA work) and decodes rank 0's JSON.
func report(t *testing.T, n int, name string, o bench.Options) (rep struct {
	Bench, Version, Host, Time string
	Ranks                      int
	Rows                       []map[string]float64
	Counters                   map[string]any
	RankCounters               []map[string]any `json:"rank_counters"`
}) {
	t.Helper()
	var out bytes.Buffer
	o.JSON = true
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
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	return rep
}

// --json says what ran, where and when, with every rank's counters, and
// for each row the iterations and the spread of the timed ones.
func TestTheJSONReportHasEveryRanksCountersAndTheSpreadOfEachRow(t *testing.T) {
	start := time.Now().Add(-time.Second).UTC()
	rep := report(t, 2, "latency", bench.Options{Sizes: []int{8, 256 << 10}, Iters: 30, Warmup: 3})
	host, _ := os.Hostname()
	when, err := time.Parse(time.RFC3339, rep.Time)
	if rep.Version == "" || rep.Host != host || err != nil || when.Before(start.Truncate(time.Second)) {
		t.Errorf("version %q, host %q (want %q), time %q", rep.Version, rep.Host, host, rep.Time)
	}
	if len(rep.Rows) != 2 || len(rep.RankCounters) != 2 {
		t.Fatalf("%d rows, %d counter sets", len(rep.Rows), len(rep.RankCounters))
	}
	for _, row := range rep.Rows {
		if row["iters"] != 30 || row["warmup"] != 3 {
			t.Errorf("row %v: iters and warmup", row)
		}
		lo, med, p99, hi, mean := row["lat_us_min"], row["lat_us_median"], row["lat_us_p99"], row["lat_us_max"], row["lat_us"]
		if !(0 < lo && lo <= med && med <= p99 && p99 <= hi && lo <= mean && mean <= hi) {
			t.Errorf("row %v: min %v, median %v, p99 %v, max %v, mean %v out of order", row["size"], lo, med, p99, hi, mean)
		}
	}
	// Rank 1 received the 256 KiB messages too: its bytes are in its own
	// counters, which rank 0's alone would not show.
	for r, cs := range rep.RankCounters {
		if got, _ := cs["pml.bytes_recv"].(float64); got < 33*(256<<10) {
			t.Errorf("rank %d: pml.bytes_recv %v, want at least 33 messages of 256 KiB", r, cs["pml.bytes_recv"])
		}
	}
}

// msgrate's --iters counts messages, run in whole windows (bw's counts
// windows, as osu_bw's).
func TestMsgrateItersCountsMessages(t *testing.T) {
	rep := report(t, 2, "msgrate", bench.Options{Sizes: []int{8}, Iters: 1000, Warmup: 10, Window: 64})
	row := rep.Rows[0]
	if row["iters"] != 1024 || row["warmup"] != 64 || row["msgs"] != 1024 {
		t.Fatalf("row %v: want 1024 messages (16 windows of 64) timed, 64 of warm-up", row)
	}
	var sent float64
	for _, cs := range rep.RankCounters {
		v, _ := cs["pml.eager_sends"].(float64)
		sent += v
	}
	// Both directions of the stream: the messages and one ack per window.
	if want := float64(1024 + 64 + 17); sent < want {
		t.Errorf("%v eager sends in the job, want at least %v", sent, want)
	}
	if lo, hi := row["pair_msgs_per_s_min"], row["pair_msgs_per_s_max"]; !(lo > 0 && lo <= hi) {
		t.Errorf("row %v: the pairs' rates", row)
	}
}

func TestBandwidthItersCountWindows(t *testing.T) {
	rep := report(t, 2, "bw", bench.Options{Sizes: []int{1024}, Iters: 5, Warmup: 1, Window: 16})
	if row := rep.Rows[0]; row["iters"] != 5 || row["msgs"] != 80 || !(row["mbps_min"] <= row["mbps_median"] && row["mbps_median"] <= row["mbps_max"]) {
		t.Fatalf("row %v: want 5 windows of 16 messages and the spread over the windows", row)
	}
}

// The collective benchmarks run on a *gobtl.Comm's own collective layer
// (reached through internal/layers), so the stack file's coll block
// decides their algorithm: a layer of their own would take the built-in
// decision, which does not pick the ring for 64 bytes.
func TestCollectiveBenchmarksRunOnTheStacksCollectiveLayer(t *testing.T) {
	stack := filepath.Join(t.TempDir(), "stack.hcl")
	if err := os.WriteFile(stack, []byte("coll {\n  allreduce = \"ring\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{ConfigFiles: []string{stack}}, func(c *gobtl.Comm) error {
		if _, err := bench.Run(c, "allreduce", bench.Options{Sizes: []int{64}, Iters: 3, Warmup: 1}); err != nil {
			return err
		}
		if n := c.Metrics().Counter("coll.allreduce.ring").Load(); n < 4 {
			return fmt.Errorf("rank %d: %d ring allreduces, want the benchmark's 4", c.Rank(), n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Each row collects the run's garbage before its barrier, so that no
// collection starts inside its timed loop, and reports the collections
// that ran there anyway ("gc"): none, since the loops allocate nothing.
func TestEachRowCollectsBeforeItsTimedLoopAndReportsCollectionsInside(t *testing.T) {
	forced := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := forced()
	rep := report(t, 2, "bw", bench.Options{Sizes: []int{64 << 10, 1 << 20}, Iters: 10, Warmup: 2, Window: 8})
	// Two ranks, goroutines of this process, two rows each: the calls of
	// the two ranks may share a collection, one per row at least.
	if got := forced() - before; got < 2 {
		t.Errorf("%d collections forced by the run, want at least one per row (2)", got)
	}
	for _, row := range rep.Rows {
		if gc, ok := row["gc"]; !ok || gc != 0 {
			t.Errorf("row %v: gc %v (reported: %v), want 0 collections inside the timed loop", row["size"], gc, ok)
		}
	}
}
