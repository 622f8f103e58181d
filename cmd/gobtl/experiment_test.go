package main

import (
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
