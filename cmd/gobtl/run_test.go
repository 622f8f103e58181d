package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/internal/topo"
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

// cpusAllowed runs `gobtl run args -- grep Cpus_allowed_list` and returns
// each rank's list and what the launcher said.
func cpusAllowed(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	args = append(append([]string{"run", "--tag-output"}, args...), "--", "grep", "Cpus_allowed_list", "/proc/self/status")
	out, errOut, code := run(t, rootCmd, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
	}
	var lists []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		_, list, ok := strings.Cut(l, "Cpus_allowed_list:")
		if !ok {
			t.Fatalf("line %q", l)
		}
		lists = append(lists, strings.TrimSpace(list))
	}
	return lists, errOut
}

// gobtl run -np 2 -- grep Cpus_allowed_list /proc/self/status shows two
// different single CPUs on a machine of two cores or more; the stack's
// placement block and the flags say otherwise, the flags first.
func TestRunBindsTwoRanksToTwoCPUsUnlessTheStackOrAFlagSaysNot(t *testing.T) {
	mask, err := topo.Affinity()
	if err != nil {
		t.Fatal(err)
	}
	if len(mask) < 2 {
		t.Skipf("one CPU here (%v)", mask)
	}
	lists, said := cpusAllowed(t, "-np", "2")
	if len(lists) != 2 || lists[0] == lists[1] || strings.ContainsAny(lists[0]+lists[1], ",-") || said != "" {
		t.Fatalf("ranks on %q, the launcher said %q: want two different single CPUs", lists, said)
	}
	unbound := writeFile(t, "unbound.hcl", "job {\n  placement {\n    bind_to = \"none\"\n    report_bindings = true\n  }\n}\n")
	lists, said = cpusAllowed(t, "-np", "2", "-c", unbound)
	if lists[0] != mask.String() || lists[1] != mask.String() || !strings.Contains(said, "rank 1 not bound (cpus "+mask.String()+")") {
		t.Fatalf("bind_to none: ranks on %q, the launcher said %q", lists, said)
	}
	lists, said = cpusAllowed(t, "-np", "2", "-c", unbound, "--bind-to", "core")
	if lists[0] == lists[1] || !strings.Contains(said, "rank 1 bound to core") {
		t.Fatalf("--bind-to core over the stack's none: ranks on %q, the launcher said %q", lists, said)
	}
}

func TestRunRejectsBadPlacementFlags(t *testing.T) {
	for _, c := range []struct{ args, want []string }{
		{[]string{"--bind-to", "cores"}, []string{`--bind-to "cores": "cores" is not one of core, numa, socket, none`}},
		{[]string{"--map-by=hwthread"}, []string{`--map-by "hwthread": "hwthread" is not one of core, numa, socket`}},
		{[]string{"--bind-to"}, []string{`--bind-to "--": "--" is not one of`}},
	} {
		args := append(append([]string{"run", "-np", "2"}, c.args...), "--", "true")
		_, errOut, code := run(t, rootCmd, args...)
		if code == 0 || !strings.Contains(errOut, c.want[0]) || !strings.Contains(errOut, "usage: gobtl run") {
			t.Errorf("%v: exit %d, %q", c.args, code, errOut)
		}
	}
}
