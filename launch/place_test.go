package launch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/internal/topo"
)

func init() { gobtlRoles["launch-grep"] = launchGrepMain }

// launchGrepMain is a launcher of $GOBTL_TEST_NP ranks that print their
// Cpus_allowed_list, for a test to start under taskset.
func launchGrepMain() int {
	np, _ := strconv.Atoi(os.Getenv("GOBTL_TEST_NP"))
	res, err := Run(context.Background(), Config{NP: np, Prog: "grep", Args: []string{"Cpus_allowed_list", "/proc/self/status"},
		TagOutput: true, Place: Placement{Report: true}, Timeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return res.Status
}

// allowedLists runs np ranks of grep Cpus_allowed_list by p and returns
// each rank's list and what the launcher said.
func allowedLists(t *testing.T, np int, p Placement) ([]string, string) {
	t.Helper()
	var out, rep bytes.Buffer
	res, err := Run(context.Background(), Config{NP: np, Prog: "grep", Args: []string{"Cpus_allowed_list", "/proc/self/status"},
		TagOutput: true, Stdout: &out, Stderr: &rep, Place: p, Timeout: time.Minute})
	if err != nil || res.Status != 0 {
		t.Fatalf("run: %v, status %d\n%s%s", err, res.Status, out.String(), rep.String())
	}
	return parseLists(t, out.String(), np), rep.String()
}

func parseLists(t *testing.T, out string, np int) []string {
	t.Helper()
	lists := make([]string, np)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r int
		var list string
		if _, err := fmt.Sscanf(l, "[%d] Cpus_allowed_list: %s", &r, &list); err != nil || r < 0 || r >= np {
			t.Fatalf("line %q: %v\n%s", l, err, out)
		}
		lists[r] = list
	}
	return lists
}

// cores is how many cores the launcher may use here.
func cores(t *testing.T) (int, topo.CPUs) {
	t.Helper()
	mask, err := topo.Affinity()
	if err != nil {
		t.Fatal(err)
	}
	top, err := topo.Read(topo.Sys)
	if err != nil {
		t.Fatal(err)
	}
	return top.CoresIn(mask), mask
}

// gobtl run -np 2 -- grep Cpus_allowed_list /proc/self/status: on two
// cores, two different single CPUs.
func TestRanksThatFitTheCoresAreEachBoundToACoreOfTheirOwn(t *testing.T) {
	n, _ := cores(t)
	if n < 2 {
		t.Skipf("%d core here: two ranks do not fit", n)
	}
	lists, rep := allowedLists(t, 2, Placement{})
	a, errA := topo.ParseCPUs(lists[0])
	b, errB := topo.ParseCPUs(lists[1])
	if errA != nil || errB != nil || len(a) == 0 || len(b) == 0 || len(a.And(b)) != 0 || rep != "" {
		t.Fatalf("rank 0 on %s, rank 1 on %s: want two cores' CPUs apart; the launcher said %q", lists[0], lists[1], rep)
	}
	top, _ := topo.Read(topo.Sys)
	for r, c := range []topo.CPUs{a, b} {
		if core := top.CoreOf(c[0]); core == nil || !c.Equal(core.CPUs.And(c)) || !c.Within(core.CPUs) {
			t.Errorf("rank %d on %v, not one core", r, c)
		}
	}
}

// One rank more than cores: nothing is bound, and the launcher says why.
func TestMoreRanksThanCoresAreNotBoundAndTheLauncherSaysSo(t *testing.T) {
	n, mask := cores(t)
	lists, rep := allowedLists(t, n+1, Placement{})
	for r, l := range lists {
		if l != mask.String() {
			t.Errorf("rank %d on %s, want the launcher's %v", r, l, mask)
		}
	}
	if want := fmt.Sprintf("gobtl run: %d ranks on %d core", n+1, n); !strings.HasPrefix(rep, want) || !strings.Contains(rep, fmt.Sprintf("(cpus %v): oversubscribed, no rank is bound", mask)) {
		t.Fatalf("the launcher said %q, want %q", rep, want)
	}
	if _, err := Run(context.Background(), Config{NP: n + 1, Prog: "true", Place: Placement{BindTo: "core"}}); err == nil || !strings.Contains(err.Error(), "more ranks than cores") {
		t.Fatalf("--bind-to core with %d ranks on %d cores: %v", n+1, n, err)
	}
}

func TestBindToNoneBindsNothing(t *testing.T) {
	_, mask := cores(t)
	lists, rep := allowedLists(t, 2, Placement{BindTo: "none"})
	if lists[0] != mask.String() || lists[1] != mask.String() || rep != "" {
		t.Fatalf("ranks on %v, the launcher said %q; want both on %v, nothing said", lists, rep, mask)
	}
}

// A launcher started on one CPU (taskset) binds within it: one rank on
// that CPU, and two ranks on it unbound.
func TestALauncherWithARestrictedMaskBindsWithinIt(t *testing.T) {
	_, mask := cores(t)
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	one := strconv.Itoa(mask[len(mask)-1])
	for np, want := range map[int]string{1: "rank 0 bound to core", 2: "oversubscribed"} {
		cmd := exec.Command("taskset", "-c", one, os.Args[0])
		cmd.Env = append(os.Environ(), envRole+"=launch-grep", "GOBTL_TEST_NP="+strconv.Itoa(np))
		var out, rep bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &rep
		if err := cmd.Run(); err != nil {
			t.Fatalf("-np %d: %v\n%s%s", np, err, out.String(), rep.String())
		}
		for r, l := range parseLists(t, out.String(), np) {
			if l != one {
				t.Errorf("-np %d: rank %d on %s, want %s", np, r, l, one)
			}
		}
		if !strings.Contains(rep.String(), want) {
			t.Errorf("-np %d: the launcher said %q, want %q", np, rep.String(), want)
		}
	}
}

func TestBadPlacementValuesAreErrors(t *testing.T) {
	for _, p := range []Placement{{MapBy: "none"}, {MapBy: "hwthread"}, {BindTo: "cores"}} {
		if err := p.Check(); err == nil {
			t.Errorf("%+v: no error", p)
		}
		if _, err := Run(context.Background(), Config{NP: 1, Prog: "true", Place: p}); err == nil || !strings.Contains(err.Error(), "is not one of") {
			t.Errorf("%+v: Run: %v", p, err)
		}
	}
}
