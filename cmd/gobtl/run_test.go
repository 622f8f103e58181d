package main

import (
	"errors"
	"strings"
	"testing"
)

// A mistake in the stack is the launcher's to report, once: no rank
// starts, so none prints it again.
func TestRunPrintsAStackErrorOnceAndStartsNoRank(t *testing.T) {
	bad := writeFile(t, "bad.hcl", "job {\n  protocl = \"rdma_read\"\n}\n")
	_, errOut, code := run(t, rootCmd, "run", "-np", "4", "-c", bad, "--", "true")
	if code != 1 || strings.Count(errOut, bad+":2:3: Unsupported argument") != 1 || !strings.Contains(errOut, "no rank was started") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	// The same through $GOBTL_CONFIG.
	t.Setenv("GOBTL_CONFIG", bad)
	if _, errOut, code = run(t, rootCmd, "run", "-np", "2", "--", "true"); code != 1 || strings.Count(errOut, "Unsupported argument") != 1 {
		t.Fatalf("with GOBTL_CONFIG: exit %d\n%s", code, errOut)
	}
}

func TestAnErrorIsPrefixedWithTheCommandOnce(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"gobtl: stack.hcl:3:5: Invalid value", "gobtl: stack.hcl:3:5: Invalid value"},
		{"bench: --sizes: bad size", "gobtl: bench: --sizes: bad size"},
	} {
		if got := errorLine(errors.New(tc.err)); got != tc.want {
			t.Errorf("errorLine(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
