package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/internal/mptest"
)

func fdCount(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// settled is pid's descriptor count once it has not changed for 200 ms
// (at most after 10 s): what a flood leaves the rank holding.
func settled(pid int) int {
	n, since := fdCount(pid), time.Now()
	for start := time.Now(); time.Since(since) < 200*time.Millisecond && time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		if m := fdCount(pid); m != n {
			n, since = m, time.Now()
		}
	}
	return n
}

// Issue 30 item 4: 5,000 connections from another user took rank 0 from
// 16 to 5,016 descriptors. Now they cost it at most core.MaxPending, and
// the job, which makes its RMA connections during the flood, runs with
// every message verified.
func TestAFloodFromAnotherUserIsBounded(t *testing.T) {
	dir, bin := setup(t)
	goFile, info, done := filepath.Join(dir, "go"), filepath.Join(dir, "info"), filepath.Join(dir, "done")
	stackFile := stack(t, dir, "extoll-static.hcl")
	results := make(chan mptest.Result, 1)
	go func() {
		results <- mptest.Job{NP: 2, Role: "exchange", Stack: stackFile,
			Env: []string{envGo + "=" + goFile, envInfo + "=" + info}, Timeout: 3 * time.Minute}.Run(t)
	}()
	var pid int
	var ports string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(info); err == nil {
			fmt.Sscanf(string(b), "%d %s", &pid, &ports)
			break
		}
		if time.Now().After(deadline) {
			os.WriteFile(goFile, nil, 0o644)
			t.Fatal("rank 0 never said where it listens")
		}
	}
	base := settled(pid)
	var addrs []string
	for _, p := range strings.Split(ports, ",") {
		addrs = append(addrs, "127.0.0.1:"+p)
	}
	lines := attacker(t, bin, "flood", envAddrs+"="+strings.Join(addrs, ","),
		envConns+"="+strconv.Itoa(5000/len(addrs)), envDone+"="+done)
	opened := await(lines, "open", 2*time.Minute)
	peak := settled(pid)
	os.WriteFile(goFile, nil, 0o644)
	var res mptest.Result
	select {
	case res = <-results:
	case <-time.After(4 * time.Minute):
		t.Fatal("the job did not end")
	}
	os.WriteFile(done, nil, 0o644)
	report := await(lines, "report", time.Minute)
	t.Logf("job: status %d\n%s%s", res.Status, res.Stdout, res.Stderr)
	t.Logf("attacker: %s; %s", opened, report)
	check(t, peak-base <= maxPending+64, "rank 0 held %d descriptors after %q to %s (%d before)", peak, opened, ports, base)
	check(t, verified(res), "the job ran with every message verified (status %d: %s)", res.Status, strings.TrimSpace(res.Stdout+res.Stderr))
}
