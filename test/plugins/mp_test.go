package plugins_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// rankMain is a rank of TestSIGKILLOfAFlowControlPluginMidJob: rank 0
// streams messages to rank 1, which checks each; halfway, each rank kills
// its own policy plugin with SIGKILL.
func rankMain() int {
	c, err := gobtl.Init(context.Background(), gobtl.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 1
	}
	defer c.Close()
	const n, size = 4000, 1024
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		if i == n/2 {
			for _, pid := range ownPlugins() {
				syscall.Kill(pid, syscall.SIGKILL)
				fmt.Printf("rank %d killed its plugin %d\n", c.Rank(), pid)
			}
		}
		if c.Rank() == 0 {
			if err := c.Send(msgtest.Fill(buf, uint64(i)), 1, 5); err != nil {
				fmt.Fprintln(os.Stderr, "send:", err)
				return 1
			}
			continue
		}
		if _, err := c.Recv(buf, 0, 5); err != nil {
			fmt.Fprintln(os.Stderr, "recv:", err)
			return 1
		}
		if err := msgtest.Check(buf, uint64(i)); err != nil {
			fmt.Fprintf(os.Stderr, "message %d corrupt: %v\n", i, err)
			return 1
		}
	}
	if err := c.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, "barrier:", err)
		return 1
	}
	if c.Rank() == 1 {
		fmt.Printf("all %d messages arrived intact\n", n)
	}
	return 0
}

// ownPlugins are this process's children that are built-in policy plugins.
func ownPlugins() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if len(f) > 1 && f[1] == fmt.Sprint(os.Getpid()) && filepath.Dir(exe) == os.Getenv("GOBTL_PLUGINTEST_DIR") {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestSIGKILLOfAFlowControlPluginMidJob(t *testing.T) {
	if !hasBuiltin("extoll_dynamic") {
		t.Skip("no extoll_dynamic plugin")
	}
	stack := filepath.Join(t.TempDir(), "stack.hcl")
	os.WriteFile(stack, []byte(fmt.Sprintf(`btl "self" "self" {}
btl "extoll" "nic0" {}
policy "flow_control" {
  plugin     = "extoll_dynamic"
  plugin_dir = %q
}
`, builtinDir)), 0o644)
	res := mptest.Job{NP: 2, Role: "rank", Stack: stack, Env: []string{"GOBTL_PLUGINTEST_DIR=" + builtinDir}}.Run(t)
	if res.Failed() {
		t.Fatalf("the job failed:\n%s", res)
	}
	out := res.Stdout + res.Stderr
	t.Logf("the job said:\n%s", out)
	for _, want := range []string{"rank 0 killed its plugin", "rank 1 killed its plugin", "all 4000 messages arrived intact",
		"stack.hcl:3:1): plugin failed; switched to the built-in fallback", `"fallback":"extoll_static"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the job's output lacks %q:\n%s", want, out)
		}
	}
}

func hasBuiltin(name string) bool {
	for _, b := range builtins {
		if b == name {
			return true
		}
	}
	return false
}
