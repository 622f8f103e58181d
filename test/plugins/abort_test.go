package plugins_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/mptest"
)

// abortRankMain is a rank of TestOnFailureAbortEndsAJobOfProcesses. No
// rank ends by itself: rank 0 kills its flow-control plugin and then
// waits, as do the others, computing (a sleep) without a call into
// gobtl — so the job ends only if the plugin's abort ends it.
func abortRankMain() int {
	c, err := gobtl.Init(context.Background(), gobtl.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 1
	}
	defer c.Close()
	if err := c.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, "barrier:", err)
		return 1
	}
	if c.Rank() == 0 {
		for _, pid := range ownPlugins() {
			syscall.Kill(pid, syscall.SIGKILL)
			fmt.Printf("rank 0 killed its plugin %d at %d\n", pid, time.Now().UnixNano())
		}
	}
	time.Sleep(10 * time.Minute)
	return 0
}

// on_failure = "abort" ends the whole job, not the rank whose plugin
// failed alone: under `gobtl run -np 4`, rank 0's extoll_dynamic plugin
// is killed while every rank computes, and the launcher stops every rank
// (none would end by itself), exits non-zero and names the rank and the
// plugin. Before, the abort was the communicator's only: rank 0's calls
// failed, and the other ranks ran on.
func TestOnFailureAbortEndsAJobOfProcesses(t *testing.T) {
	if !hasBuiltin("extoll_dynamic") {
		t.Skip("no extoll_dynamic plugin")
	}
	stack := filepath.Join(t.TempDir(), "stack.hcl")
	os.WriteFile(stack, []byte(fmt.Sprintf(`btl "self" "self" {}
btl "extoll" "nic0" {}
policy "flow_control" {
  plugin     = "extoll_dynamic"
  plugin_dir = %q
  on_failure = "abort"
}
`, builtinDir)), 0o644)
	res := mptest.Job{NP: 4, Role: "abortrank", Stack: stack, Command: true, Timeout: 2 * time.Minute,
		Env: []string{"GOBTL_PLUGINTEST_DIR=" + builtinDir}}.Run(t)
	end := time.Now()
	if !res.Failed() {
		t.Fatalf("the job succeeded:\n%s", res)
	}
	var pid, killed int64
	if _, err := fmt.Sscanf(res.Stdout, "rank 0 killed its plugin %d at %d", &pid, &killed); err != nil {
		t.Fatalf("rank 0 did not kill its plugin (%v):\n%s", err, res)
	}
	t.Logf("the job ended %v after the plugin was killed, with status %d", end.Sub(time.Unix(0, killed)).Round(time.Millisecond), res.Status)
	report := ""
	for _, l := range strings.Split(res.Stderr, "\n") {
		if strings.HasPrefix(l, "gobtl run: ") {
			report = l
		}
	}
	for _, want := range []string{"rank 0 (pid ", "aborted: ", `flow_control policy "extoll_dynamic"`, "stack.hcl:3:1", "plugin failed", `on_failure = "abort"`, "job of 4 ranks stopped"} {
		if !strings.Contains(report, want) {
			t.Errorf("the launcher's report lacks %q: %s\n%s", want, report, res)
		}
	}
}
