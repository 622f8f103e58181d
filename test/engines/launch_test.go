package engines

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The ring example under every engine: four ranks pass a token and
// exchange checked messages from 1 B to 4 MiB between every pair.
func TestTheRingPassesUnderEveryEngine(t *testing.T) {
	for _, e := range allEngines {
		t.Run(e.name, func(t *testing.T) {
			e.need(t)
			r := run(t, e, 4, nil, bin("ring"))
			if r.status != 0 {
				t.Fatalf("ring under %s failed:\n%s", e.name, r)
			}
			// A program that missed its engine runs as four jobs of one
			// rank, each passing alone: the summary says which it was.
			if !strings.Contains(r.stdout, "ring: 4 ranks") || !strings.Contains(r.stdout, "verified") {
				t.Fatalf("ring under %s did not run as one job of 4 ranks:\n%s", e.name, r)
			}
		})
	}
}

// The NPB LU pattern on 8 ranks under srun: every message checked for
// loss, duplication and corruption, every rank's counters reported.
func TestTheLUPatternPassesOnEightRanksUnderSrun(t *testing.T) {
	for _, e := range []engine{srunPMIx, srunPMI2} {
		t.Run(e.name, func(t *testing.T) {
			e.need(t)
			r := run(t, e, 8, nil, bin("gobtl"), "bench", "lu", "--iters", "3", "--scale", "0.05", "--json")
			if r.status != 0 {
				t.Fatalf("lu under %s failed:\n%s", e.name, r)
			}
			var rep struct {
				Ranks        int
				RankCounters []map[string]any `json:"rank_counters"`
				RankMsgs     [][]int64        `json:"rank_msgs"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("lu's report: %v\n%s", err, r)
			}
			if rep.Ranks != 8 || len(rep.RankCounters) != 8 || len(rep.RankMsgs) != 8 {
				t.Fatalf("lu reported %d ranks (%d counters, %d message rows), want 8:\n%s", rep.Ranks, len(rep.RankCounters), len(rep.RankMsgs), r)
			}
			var msgs int64
			for _, row := range rep.RankMsgs {
				for _, m := range row {
					msgs += m
				}
			}
			// The pattern's own count at 8 ranks: 1260 messages per time step and 88 more.
			if want := int64(1260*3 + 88); msgs != want {
				t.Errorf("lu sent %d messages, the pattern sends %d", msgs, want)
			}
			t.Log(fmt.Sprintf("lu: %d checked messages on 8 ranks under %s in %v", msgs, e.name, r.took))
		})
	}
}
