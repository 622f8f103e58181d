package main

import (
	"strings"
	"testing"

	"github.com/gobtl/gobtl/experiment"
)

// Every registered experiment has its command, and every experiment with
// a rank program can be started as a rank.
func TestEveryRegisteredExperimentHasACommand(t *testing.T) {
	names := experiment.Names()
	if len(names) < 6 {
		t.Fatalf("only %v registered", names)
	}
	for _, n := range names {
		if c, _, err := experimentCmd.Find([]string{n}); err != nil || c.Name() != n {
			t.Errorf("experiment %s has no command (%v)", n, err)
		}
	}
	for _, n := range []string{"flowcontrol", "multirail", "extoll"} {
		if e, ok := experiment.Lookup(n); !ok || e.Rank == nil {
			t.Errorf("experiment %s has no rank program", n)
		}
	}
	if c, _, err := experimentCmd.Find([]string{"rank"}); err != nil || !c.Hidden {
		t.Errorf("no hidden rank command: %v", err)
	}
}

// Every experiment takes the same shared flags, with --reps reporting the
// median, and experiments with steps take --only.
func TestEveryExperimentHasTheSharedFlags(t *testing.T) {
	for _, n := range experiment.Names() {
		c, _, err := experimentCmd.Find([]string{n})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"reps", "quick", "plots", "json", "plugins", "plugin-dir"} {
			if c.Flags().Lookup(f) == nil {
				t.Errorf("experiment %s has no --%s", n, f)
			}
		}
		if r := c.Flags().Lookup("reps"); r != nil && !strings.Contains(r.Usage, "median") {
			t.Errorf("experiment %s: --reps %q does not report the median", n, r.Usage)
		}
	}
}
