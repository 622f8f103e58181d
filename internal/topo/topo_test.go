package topo

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func mustRead(t *testing.T, tree string) *Topology {
	t.Helper()
	top, err := Read("testdata/" + tree)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func cpus(t *testing.T, s string) CPUs {
	t.Helper()
	c, err := ParseCPUs(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCPUListsReadAndWriteAsTheKernelDoes(t *testing.T) {
	for in, want := range map[string]string{"0-3,8-11\n": "0-3,8-11", "3,1,2": "1-3", "0": "0", "": "", "5-5,7": "5,7"} {
		c, err := ParseCPUs(in)
		if err != nil || c.String() != want {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %s", in, c, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "0-99999999", "1,,2"} {
		if _, err := ParseCPUs(bad); err == nil {
			t.Errorf("ParseCPUs(%q) took it", bad)
		}
	}
}

func TestTheTopologyOfTwoSocketsOfFourCoresOfTwoThreads(t *testing.T) {
	top := mustRead(t, "2s4c2t")
	if len(top.CPUs) != 16 || len(top.Cores) != 8 || len(top.Sockets) != 2 || len(top.NUMA) != 2 {
		t.Fatalf("%d cpus, %d cores, %d sockets, %d numa", len(top.CPUs), len(top.Cores), len(top.Sockets), len(top.NUMA))
	}
	var got []string
	for _, c := range top.Cores {
		got = append(got, fmt.Sprintf("s%d/n%d/c%d:%v", c.Socket, c.NUMA, c.ID, c.CPUs))
	}
	want := "s0/n0/c0:0,8 s0/n0/c1:1,9 s0/n0/c2:2,10 s0/n0/c3:3,11 s1/n1/c0:4,12 s1/n1/c1:5,13 s1/n1/c2:6,14 s1/n1/c3:7,15"
	if strings.Join(got, " ") != want {
		t.Fatalf("cores %s\nwant  %s", strings.Join(got, " "), want)
	}
}

// The masks of every rank under the mappings and bindings mpirun has,
// on 2 sockets × 4 cores × 2 threads with a NUMA node per socket, and on
// one socket whose 4 cores are split into 2 NUMA nodes.
func TestPlacementGivesEachRankTheMaskMpirunWould(t *testing.T) {
	for _, c := range []struct {
		tree     string
		np       int
		by, bind Level
		want     string
	}{
		{"2s4c2t", 4, LevelDefault, LevelDefault, "0,8 1,9 2,10 3,11"},
		{"2s4c2t", 8, LevelCore, LevelCore, "0,8 1,9 2,10 3,11 4,12 5,13 6,14 7,15"},
		{"2s4c2t", 4, LevelSocket, LevelCore, "0,8 4,12 1,9 5,13"},
		{"2s4c2t", 4, LevelNUMA, LevelCore, "0,8 4,12 1,9 5,13"},
		{"2s4c2t", 2, LevelSocket, LevelSocket, "0-3,8-11 4-7,12-15"},
		{"2s4c2t", 3, LevelCore, LevelSocket, "0-3,8-11 0-3,8-11 0-3,8-11"},
		{"2s4c2t", 3, LevelCore, LevelNUMA, "0-3,8-11 0-3,8-11 0-3,8-11"},
		{"2s4c2t", 6, LevelSocket, LevelNUMA, "0-3,8-11 4-7,12-15 0-3,8-11 4-7,12-15 0-3,8-11 4-7,12-15"},
		{"1s4c1t-2numa", 2, LevelNUMA, LevelCore, "0 2"},
		{"1s4c1t-2numa", 3, LevelNUMA, LevelNUMA, "0-1 2-3 0-1"},
		{"1s4c1t-2numa", 2, LevelSocket, LevelCore, "0 1"},
		{"1s4c1t-2numa", 4, LevelCore, LevelNone, ""},
	} {
		name := fmt.Sprintf("%s -np %d --map-by %v --bind-to %v", c.tree, c.np, c.by, c.bind)
		plan, err := Policy{MapBy: c.by, BindTo: c.bind}.Place(mustRead(t, c.tree), c.np)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var got []string
		for _, s := range plan.Slots {
			got = append(got, s.CPUs.String())
		}
		if strings.Join(got, " ") != c.want || plan.Note != "" {
			t.Errorf("%s: %q (note %q), want %q", name, strings.Join(got, " "), plan.Note, c.want)
		}
	}
}

// A launcher bound to part of the node (taskset, a cgroup) places its
// ranks on that part only, one per core that has an allowed thread.
func TestPlacementStaysWithinTheLaunchersCPUs(t *testing.T) {
	top := mustRead(t, "2s4c2t").Within(cpus(t, "2-5,13"))
	plan, err := Policy{}.Place(top, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range plan.Slots {
		got = append(got, s.CPUs.String())
	}
	if strings.Join(got, " ") != "2 3 4 5,13" {
		t.Fatalf("masks %v, want 2 3 4 5,13", got)
	}
	if _, err := (Policy{}).Place(top, 5); err != nil {
		t.Fatal(err)
	}
	if plan, _ := (Policy{}).Place(top, 5); plan.Slots != nil || !strings.Contains(plan.Note, "5 ranks on 4 cores (cpus 2-5,13): oversubscribed") {
		t.Fatalf("5 ranks on 4 cores: %+v", plan)
	}
}

func TestMoreRanksThanCoresBindNothingOrFailWhenABindingWasAskedFor(t *testing.T) {
	top := mustRead(t, "1s4c1t-2numa")
	plan, err := Policy{}.Place(top, 5)
	if err != nil || plan.Slots != nil || !strings.Contains(plan.Note, "oversubscribed, no rank is bound") {
		t.Fatalf("default: %+v, %v", plan, err)
	}
	if plan, err := (Policy{BindTo: LevelNone}).Place(top, 5); err != nil || plan.Slots != nil || plan.Note != "" {
		t.Fatalf("none: %+v, %v", plan, err)
	}
	for _, l := range []Level{LevelCore, LevelNUMA, LevelSocket} {
		if _, err := (Policy{BindTo: l}).Place(top, 5); !errors.Is(err, ErrOversubscribed) || !strings.Contains(err.Error(), "bind to none") {
			t.Errorf("bind to %v: %v", l, err)
		}
	}
}

func TestLevelsParseOnlyTheirNames(t *testing.T) {
	if l, err := ParseLevel("numa", BindLevels); l != LevelNUMA || err != nil {
		t.Fatal(l, err)
	}
	if _, err := ParseLevel("none", MapLevels); err == nil || err.Error() != `"none" is not one of core, numa, socket` {
		t.Fatal(err)
	}
	if _, err := ParseLevel("cores", BindLevels); err == nil {
		t.Fatal("cores taken")
	}
}

func TestDescribeAndDrawNameABindingAsOpenMPIDoes(t *testing.T) {
	top := mustRead(t, "2s4c2t")
	for set, want := range map[string]string{
		"1,9":       "core 1 of socket 0 (cpus 1,9) [../BB/../..][../../../..]",
		"4-7,12-15": "socket 1 (cpus 4-7,12-15) [../../../..][BB/BB/BB/BB]",
		"0-15":      "all of cpus 0-15 [BB/BB/BB/BB][BB/BB/BB/BB]",
		"0-7":       "cpus 0-7 [B./B./B./B.][B./B./B./B.]",
		"3":         "cpus 3 [../../../B.][../../../..]",
	} {
		c := cpus(t, set)
		if got := top.Describe(c) + " " + top.Draw(c); got != want {
			t.Errorf("%s: %q, want %q", set, got, want)
		}
	}
	if got := mustRead(t, "1s4c1t-2numa").Describe(cpus(t, "2-3")); got != "numa 1 (cpus 2-3)" {
		t.Errorf("numa: %q", got)
	}
}

// A rank reads where it runs: the node's CPUs from the launcher's word,
// else the cgroup's cpuset (v2 or v1), else every online CPU.
func TestARankReadsItsBindingAndItsNodesCPUs(t *testing.T) {
	const sys = "testdata/2s4c2t"
	noEnv := func(string) string { return "" }
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvNodeCPUs {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		name, cgroup string
		env          func(string) string
		mask         string
		node, str    string
		cores        int
	}{
		{"unbound", "none", noEnv, "0-15", "0-15", "not bound (cpus 0-15)", 8},
		{"bound by srun to a core", "none", noEnv, "5,13", "0-15", "bound to core 1 of socket 1 (cpus 5,13)", 8},
		{"gobtl run under taskset", "none", env("0-3"), "2", "0-3", "bound to core 2 of socket 0 (cpus 2)", 4},
		{"a cgroup v2 cpuset", "testdata/cgroup-v2", noEnv, "1", "1-2,9-10", "bound to cpus 1", 2},
		{"a cgroup v1 cpuset", "testdata/cgroup-v1", noEnv, "4-7,12-15", "4-7,12-15", "not bound (cpus 4-7,12-15)", 4},
		{"a bad word from the launcher", "none", env("x"), "0", "0-15", "bound to cpus 0", 8},
	} {
		b := self(sys, c.cgroup, c.env, cpus(t, c.mask))
		if b.Err != nil || b.Node.String() != c.node || b.String() != c.str || b.Cores() != c.cores {
			t.Errorf("%s: node %v, %q, %d cores, %v; want %s, %q, %d", c.name, b.Node, b.String(), b.Cores(), b.Err, c.node, c.str, c.cores)
		}
		if !b.OwnsCore(c.cores) || b.OwnsCore(c.cores+1) {
			t.Errorf("%s: %d ranks own a core: %v; %d: %v", c.name, c.cores, b.OwnsCore(c.cores), c.cores+1, b.OwnsCore(c.cores+1))
		}
	}
}

// This machine's own /sys reads, and its ranks fit its cores.
func TestThisNodesTopologyReads(t *testing.T) {
	top, err := Read(Sys)
	if err != nil {
		t.Fatal(err)
	}
	mask, err := Affinity()
	if err != nil || len(mask) == 0 || !mask.Within(top.CPUs) {
		t.Fatalf("affinity %v (%v) not within the online %v", mask, err, top.CPUs)
	}
	if s := Self(); s.Err != nil || !s.Mask.Equal(mask) || s.Cores() < 1 {
		t.Fatalf("Self: %+v", s)
	}
}

// A rank that could not read its affinity says so rather than "not bound".
func TestABindingThatCouldNotBeReadSaysSo(t *testing.T) {
	b := Binding{Err: errors.New("sched_getaffinity: EPERM")}
	if got := b.String(); got != "binding unknown (sched_getaffinity: EPERM)" || b.Bound() {
		t.Fatalf("%q, bound %v", got, b.Bound())
	}
}
