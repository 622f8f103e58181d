package patterns_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLUUnderGobtlRun runs `gobtl run -np 8 -- gobtl bench lu --json` with
// real processes, over shared memory and over InfiniBand (softrc), and
// checks the report: the documented message count, a message matrix and
// each rank's counters of the transport the stack names.
func TestLUUnderGobtlRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gobtl and starts 8 processes twice")
	}
	bin := filepath.Join(t.TempDir(), "gobtl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/gobtl/gobtl/cmd/gobtl").CombinedOutput(); err != nil {
		t.Fatalf("build gobtl: %v\n%s", err, out)
	}
	for _, tc := range []struct{ stack, prefix string }{{"", "sm."}, {"../../conf/examples/ib.hcl", "ib."}} {
		t.Run(tc.prefix+"stack", func(t *testing.T) {
			args := []string{"run", "-np", "8", "--timeout", "2m"}
			if tc.stack != "" {
				args = append(args, "-c", tc.stack)
			}
			args = append(args, "--", bin, "bench", "lu", "--json", "--iters", "2", "--scale", "0.1")
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("gobtl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			var rep struct {
				Rows         []map[string]float64
				RankCounters []map[string]any `json:"rank_counters"`
				RankMsgs     [][]int64        `json:"rank_msgs"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("%v:\n%s", err, stdout.String())
			}
			if len(rep.Rows) != 1 || rep.Rows[0]["msgs"] != 1260*2+88 {
				t.Fatalf("rows %v, want one with %d messages", rep.Rows, 1260*2+88)
			}
			if len(rep.RankMsgs) != 8 || len(rep.RankCounters) != 8 {
				t.Fatalf("%d message rows, %d counter sets, want 8", len(rep.RankMsgs), len(rep.RankCounters))
			}
			want := eightRankCounts["lu"].want
			for r, cs := range rep.RankCounters {
				for d, m := range rep.RankMsgs[r] {
					if m != int64(want(r, d, 2)) {
						t.Errorf("rank %d sent rank %d %d messages, want %d", r, d, m, want(r, d, 2))
					}
				}
				found := false
				for name := range cs {
					found = found || strings.HasPrefix(name, tc.prefix)
				}
				if !found {
					t.Errorf("rank %d's counters have no %s*: %v", r, tc.prefix, cs)
				}
			}
		})
	}
}
