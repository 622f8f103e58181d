package plugins

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// switches is how often the threads of process pid have been switched
// out so far, voluntarily or not: a thread that sleeps in one blocking
// call is switched out once, a thread woken four times a second four
// times a second.
func switches(t testing.TB, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("the threads of process %d: %v", pid, err)
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.Atoi(strings.TrimSpace(v))
				n += c
			}
		}
	}
	return n
}

// cpuTime is the CPU time the threads of process pid have run so far
// (the first field of each thread's schedstat, in nanoseconds).
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("the threads of process %d: %v", pid, err)
	}
	var ns int64
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64); err == nil {
			ns += v
		}
	}
	return time.Duration(ns)
}

// A plugin whose policy has nothing to do costs the ranks' cores nothing:
// while the mechanism only polls for decisions (as core/policy's Driver
// does every poll interval), no batch goes to the plugin, and the plugin
// process wakes no thread — it waits for its host's end in one read of
// the host pipe (wire.EnvHostFD), not by polling its parent's pid four
// times a second. On two cores both ranks spin on, each such wake-up
// takes a core from a rank for its length.
func TestAnIdlePluginProcessWakesNoThread(t *testing.T) {
	log, _ := testLogger()
	m := core.NewMetrics()
	p := openTest(t, core.KindFlowControl, nil, "", Options{Log: log, Metrics: m})
	sent := m.Counter(core.MetricName("plugin", "testpolicy", "batches"))
	fc := p.FlowControl()
	if _, err := fc.Setup(ibInfo); err != nil {
		t.Fatal(err)
	}
	out := fc.Observe([]core.FlowEvent{{Kind: core.FlowActivity, Peer: 1, Value: 7}}, nil)
	out = collect(t, fc, out, 1)
	pid := p.Pid()
	batches := sent.Load()
	// The start-up's work (the runtime's first GC cycles, the handshake's
	// goroutines ending) settles first, in a time a loaded machine
	// stretches: the plugin is idle once a second passes with at most one
	// switch, and one that polls never has such a second (polling the
	// parent four times a second costs four).
	var woke []int
	for range 10 {
		before := switches(t, pid)
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(core.PolicyPollInterval) {
			out = fc.Observe(nil, out[:0])
			if len(out) > 0 {
				t.Fatalf("an idle policy proposed %+v", out)
			}
		}
		// One spare for a runtime chore (a forced GC, the scavenger)
		// landing in the second.
		if woke = append(woke, switches(t, pid)-before); woke[len(woke)-1] <= 1 {
			break
		}
	}
	if n := sent.Load() - batches; n != 0 {
		t.Errorf("%d batches went to the plugin while the mechanism only polled", n)
	}
	if woke[len(woke)-1] > 1 {
		t.Errorf("the idle plugin process's threads were switched %v times in each of %d seconds, want at most 1 in one of them", woke, len(woke))
	}
}

// A plugin runs with the environment the host sets for it, whatever the
// rank's own: a rank started with GOMAXPROCS=3 (or a log level of its
// own) still gets plugins of one P, and every other variable of the
// host's reaches them as it is.
func TestThePluginsVariablesWinOverTheHosts(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	t.Setenv("GOBTL_TEST_PASSED_THROUGH", "yes")
	log, _ := testLogger()
	p := openTest(t, core.KindFlowControl, nil, "", Options{Log: log, Metrics: core.NewMetrics()})
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	var procs []string
	through := false
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
			procs = append(procs, v)
		}
		through = through || kv == "GOBTL_TEST_PASSED_THROUGH=yes"
	}
	if len(procs) != 1 || procs[0] != "1" {
		t.Errorf("the plugin's GOMAXPROCS: %q, want only \"1\"", procs)
	}
	if !through {
		t.Error("a variable of the host's did not reach the plugin")
	}
}
