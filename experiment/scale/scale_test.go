package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/experiment"
)

// quick runs the experiment small, in this process (no launcher: the
// cost runs in-process too), and returns the tables and the JSON
// document.
func quick(t *testing.T, only ...string) (string, map[string]any) {
	t.Helper()
	var out, doc bytes.Buffer
	env := &experiment.Env{Ctx: context.Background(), Out: &out, Quick: true, Plots: t.TempDir(), JSON: &doc}
	o := Options{Ranks: []int{8}, Patterns: []string{"lu", "mg"}, MemRanks: []int{8, 16}, UtilRanks: []int{8}, CostRanks: []int{8}}
	if err := experiment.Run(env, New(env, o), only); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var m map[string]any
	if err := json.Unmarshal(doc.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	return out.String(), m
}

func TestTheQuickScaleExperimentMeasuresEveryTable(t *testing.T) {
	out, doc := quick(t)
	for _, want := range []string{"-- Table 1", "-- Table 2", "Receive-buffer memory per process by scheme", "Seed 002 at scale",
		"Buffer utilization", "Seed 003 Table 3", "simulator's cost"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	// Counts, not times: each of these trends is decided by the
	// mechanisms, and a run that does not reproduce it is a regression.
	checks, _ := doc["checks"].([]any)
	if len(checks) < 6 {
		t.Fatalf("%d checks:\n%s", len(checks), out)
	}
	seed003 := 0
	for _, c := range checks {
		c := c.(map[string]any)
		if c["table"] == "seed 003 Table 3 (simulated EXTOLL)" {
			seed003++
		}
		if ok, _ := c["reproduced"].(bool); !ok {
			t.Errorf("not reproduced: %v", c)
		}
	}
	if seed003 == 0 {
		t.Errorf("no check of seed 003's Table 3 from the simulated EXTOLL fabric:\n%s", out)
	}
	if strings.Contains(out, "FINALIZE FAILED") {
		t.Errorf("a finalize failed:\n%s", out)
	}
}

// TestTheScaleTablesAreDeterministic runs seed 000's step twice: every
// count in its tables must be the same (the wall times may not).
func TestTheScaleTablesAreDeterministic(t *testing.T) {
	var tables [2]string
	for i := range tables {
		out, _ := quick(t, "flowcontrol")
		out, _, _ = strings.Cut(out, "== Summary") // the machine's load
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "simulated runs") || strings.HasPrefix(l, "Machine:") || strings.Contains(l, " took ") || strings.HasPrefix(l, "plot: ") {
				continue // wall times, load, a test's own directory
			}
			keep = append(keep, l)
		}
		tables[i] = strings.Join(keep, "\n")
	}
	if tables[0] != tables[1] {
		t.Fatalf("two runs differ:\n%s\n---\n%s", tables[0], tables[1])
	}
	if !strings.Contains(tables[0], "LU        8") {
		t.Fatalf("no LU row:\n%s", tables[0])
	}
}
