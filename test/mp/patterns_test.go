package mp

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench"
	_ "github.com/gobtl/gobtl/bench/patterns"
	"github.com/gobtl/gobtl/internal/mptest"
)

// TestLUUnderGobtlRun runs `gobtl run -np 8 -- gobtl bench lu --json`
// with real processes, over shared memory and over InfiniBand (softrc),
// and checks the report against the same pattern run by goroutine ranks
// in this test: the same messages between the same ranks, and each
// rank's counters of the transport the stack names.
func TestLUUnderGobtlRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 8 processes twice")
	}
	var want *bench.Report
	err := gobtl.RunLocal(context.Background(), 8, gobtl.Options{}, func(c *gobtl.Comm) error {
		rep, err := bench.Run(c, "lu", bench.Options{Iters: 2, Scale: 0.1})
		if c.Rank() == 0 {
			want = rep
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantMsgs, _ := want.Rows[0].Get("msgs")
	gobtlCmd := mptest.Gobtl(t)
	for _, tc := range []struct{ stack, prefix string }{{"", "sm."}, {"../../conf/examples/ib.hcl", "ib."}} {
		t.Run(tc.prefix+"stack", func(t *testing.T) {
			args := []string{"run", "-np", "8", "--timeout", "2m"}
			if tc.stack != "" {
				args = append(args, "-c", tc.stack)
			}
			args = append(args, "--", gobtlCmd, "bench", "lu", "--json", "--iters", "2", "--scale", "0.1")
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(gobtlCmd, args...)
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
			if len(rep.Rows) != 1 || rep.Rows[0]["msgs"] != wantMsgs || wantMsgs == 0 {
				t.Fatalf("rows %v, want one with the %v messages of the run in this process", rep.Rows, wantMsgs)
			}
			if !reflect.DeepEqual(rep.RankMsgs, want.RankMsgs) || len(rep.RankCounters) != 8 {
				t.Fatalf("message matrix %v, want %v as in this process; %d counter sets", rep.RankMsgs, want.RankMsgs, len(rep.RankCounters))
			}
			for r, cs := range rep.RankCounters {
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
