package extoll

import (
	"strings"
	"testing"

	"github.com/gobtl/gobtl/experiment"
)

func TestPatternsRunInProcess(t *testing.T) {
	for _, st := range []Stack{Reference(), {Scheme: "extoll_static", SlotsPerPeer: 20, CreditSlots: 2}, {Scheme: "extoll_dynamic", SlotsPerPeer: 12, CreditSlots: 2}} {
		for _, sp := range []Spec{
			{Pattern: "multipingpong", Iters: 5},
			{Pattern: "alltoall", Iters: 3, Active: 2},
			{Pattern: "phases", Iters: 2, Phases: []int{4, 2, 4}, Groups: []int{0, 2}},
		} {
			o, err := InProcess(4, st, sp)
			if err != nil {
				t.Fatalf("%v %s: %v", st, sp.Pattern, err)
			}
			if o.UsPerIter <= 0 || o.Counters["frames_out"] == 0 {
				t.Fatalf("%v %s: %+v", st, sp.Pattern, o)
			}
			if sp.Pattern == "phases" && len(o.Credits) != 6 {
				t.Fatalf("%d credit samples", len(o.Credits))
			}
		}
	}
}

func TestExperimentsPrintTheirTables(t *testing.T) {
	var out strings.Builder
	env := &experiment.Env{Out: &out, Quick: true}
	err := experiment.Run(env, New(env, Options{Ranks: 4, InProcess: true}), []string{"memory", "phases", "handoff", "none"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Table 3", "Eq.7 static", "1024 ", "Multi-phase", "steals", "compulsory requests", "stalled, as the hardware would", "(phases took ", "== Summary"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
	// The memory the engines allocate: the dynamic scheme's a quarter or
	// less of the static one's, as Table 3's (4096+4)n against (1024+150)n.
	for _, c := range env.Checks() {
		if c.Table == "Table 3 memory" && !c.Reproduced {
			t.Errorf("%s: %s", c.Row, c.Verdict())
		}
	}
}
