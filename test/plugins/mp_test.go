package plugins_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtl/gobtl"
)

// envRole makes this test binary a rank of a job started by gobtl run.
const envRole = "GOBTL_PLUGINTEST_ROLE"

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
			for j := range buf {
				buf[j] = byte(i ^ j)
			}
			if err := c.Send(buf, 1, 5); err != nil {
				fmt.Fprintln(os.Stderr, "send:", err)
				return 1
			}
			continue
		}
		if _, err := c.Recv(buf, 0, 5); err != nil {
			fmt.Fprintln(os.Stderr, "recv:", err)
			return 1
		}
		for j := range buf {
			if buf[j] != byte(i^j) {
				fmt.Fprintf(os.Stderr, "message %d byte %d corrupt\n", i, j)
				return 1
			}
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
	cmd := exec.Command(gobtlBin, "run", "-np", "2", "--timeout", "120s", "-c", stack, "--", os.Args[0])
	cmd.Env = append(os.Environ(), envRole+"=rank", "GOBTL_PLUGINTEST_DIR="+builtinDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the job failed: %v\n%s", err, out.String())
	}
	t.Logf("the job said:\n%s", out.String())
	for _, want := range []string{"rank 0 killed its plugin", "rank 1 killed its plugin", "all 4000 messages arrived intact",
		"stack.hcl:3): plugin failed; switched to the built-in fallback", `"fallback":"extoll_static"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the job's output lacks %q:\n%s", want, out.String())
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
