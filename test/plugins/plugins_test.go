// Package plugins_test runs whole jobs (gobtl.RunLocal, ranks as
// goroutines over the in-process fabric) whose policies are plugin
// processes: a scheduling plugin adjusting the weights of two rails, a
// plugin killed with SIGKILL mid-job, and on_failure = "abort".
package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/layers"
	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/internal/msgtest"
)

var (
	testpolicyBin string
	// builtinDir holds every plugins/<name> wrapper of a built-in policy.
	builtinDir string
	builtins   []string
)

func TestMain(m *testing.M) {
	mptest.Main(m, map[string]func() int{"rank": rankMain, "abortrank": abortRankMain}, build)
}

// build builds the test policy plugin and every plugins/<name> wrapper of
// a built-in policy into a directory of their own.
func build() (func(), error) {
	dir, err := os.MkdirTemp("", "gobtl-plugin-jobs-")
	if err != nil {
		return nil, err
	}
	testpolicyBin = filepath.Join(dir, "testpolicy")
	if err := mptest.Build("", testpolicyBin, "../../plugins/internal/testplugins/testpolicy"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	mains, _ := mptest.Mains("../../plugins", "*/main.go")
	builtinDir = filepath.Join(dir, "builtin")
	for _, m := range mains {
		builtins = append(builtins, filepath.Base(m))
	}
	if len(mains) > 0 {
		if err := mptest.Build("../../plugins", builtinDir+string(filepath.Separator), mains...); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return func() { os.RemoveAll(dir) }, nil
}

// stack writes a stack file: two in-process rails of different speeds and
// a scheduling policy served by the testpolicy plugin, with body.
func stack(t testing.TB, body string) string {
	return stackWith(t, fmt.Sprintf("plugin = \"testpolicy\"\n  path   = %q", testpolicyBin), body)
}

// stackWith is stack with the policy block's selection (builtin or
// plugin) given.
func stackWith(t testing.TB, sel, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stack.hcl")
	src := fmt.Sprintf(`job {
  protocol = "rdma_write"
  log { level = "error" }
}
btl "inproc" "fast" { bandwidth = "4GB/s" }
btl "inproc" "slow" { bandwidth = "1GB/s" }
policy "sched" {
  %s
%s
}
`, sel, body)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// exchange sends n messages of size bytes from rank 0 to rank 1, each
// with its own pattern, and checks every byte; midway it calls mid once.
func exchange(c *gobtl.Comm, n, size int, mid func()) error {
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		if i == n/2 && mid != nil && c.Rank() == 0 {
			mid()
		}
		switch c.Rank() {
		case 0:
			if err := c.Send(msgtest.Fill(buf, uint64(i)), 1, i); err != nil {
				return fmt.Errorf("send %d: %w", i, err)
			}
		case 1:
			clear(buf)
			st, err := c.Recv(buf, 0, i)
			if err != nil {
				return fmt.Errorf("recv %d: %w", i, err)
			}
			if st.Count != size {
				return fmt.Errorf("message %d: %d bytes, want %d", i, st.Count, size)
			}
			if err := msgtest.Check(buf, uint64(i)); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
		}
	}
	return c.Barrier()
}

func TestASchedulingPluginSteersAJob(t *testing.T) {
	path := stack(t, `  mode = "good"`)
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{path}}, func(c *gobtl.Comm) error {
		if err := exchange(c, 40, 1<<20, nil); err != nil {
			return err
		}
		if c.Rank() != 0 {
			return nil // with rdma_write the sender stripes and measures
		}
		// The plugin's weights arrive asynchronously; the progress loop
		// applies them.
		unequal := func() bool { w := layers.PML(c).Weights(1); return len(w) == 2 && w[0] != w[1] }
		if err := msgtest.Poll("a decision of the plugin to be applied", 20*time.Second, unequal, func() int { layers.PML(c).Progress(); time.Sleep(time.Millisecond); return 0 }); err != nil {
			return fmt.Errorf("weights toward rank 1 still %v: %w", layers.PML(c).Weights(1), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// plugins are the pids of running testpolicy processes started by this
// test binary's builds (matched by executable path); with parent > 0,
// only the children of that process.
func plugins(t *testing.T, parent int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || exe != testpolicyBin {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[0] == "Z" || parent > 0 && f[1] != strconv.Itoa(parent) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// captureStderr redirects os.Stderr (where the job's log goes) to a pipe
// until the returned function is called, which returns what was written.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	return func() string {
		os.Stderr = old
		w.Close()
		return <-done
	}
}

func TestSIGKILLingThePluginMidJobLosesNoMessage(t *testing.T) {
	path := stack(t, `  mode = "good"`)
	stop := captureStderr(t)
	killed := 0
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{path}}, func(c *gobtl.Comm) error {
		err := exchange(c, 60, 256<<10, func() {
			for _, pid := range plugins(t, os.Getpid()) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
			}
		})
		if err != nil {
			return err
		}
		// The host learns of the death asynchronously; the job may finish
		// first. Wait (bounded) until this rank's proxy has noticed, so
		// that the log has something to show.
		if err := msgtest.Poll("the host to notice the plugin's death", 10*time.Second, func() bool { return pluginFailures(c) > 0 }); err != nil {
			return fmt.Errorf("rank %d: %w", c.Rank(), err)
		}
		return c.Barrier()
	})
	logs := stop()
	if err != nil {
		t.Fatalf("the job failed: %v\nlog:\n%s", err, logs)
	}
	if killed != 2 {
		t.Fatalf("killed %d plugin processes, want one per rank", killed)
	}
	for _, want := range []string{"plugin failed", "stack.hcl:7", "fallback"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
}

// TestOnFailureAbortEndsTheJob runs a job whose plugin crashes with
// on_failure = "abort": the ranks' blocking calls fail with
// core.ErrAborted and the plugin's error, the test process lives on (a
// library does not exit its host), and no plugin process outlives the job.
func TestOnFailureAbortEndsTheJob(t *testing.T) {
	path := stack(t, `  mode = "crash"
  after = 2
  on_failure = "abort"`)
	stop := captureStderr(t)
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{path}}, func(c *gobtl.Comm) error {
		return exchange(c, 1000, 256<<10, nil)
	})
	logs := stop()
	if !errors.Is(err, core.ErrAborted) {
		t.Fatalf("the job ended with %v, want core.ErrAborted\nlog:\n%s", err, logs)
	}
	for _, want := range []string{"stack.hcl:7", `on_failure = "abort"`, "plugin failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if !strings.Contains(logs, "job aborted by a failed policy plugin") {
		t.Errorf("the log does not say the plugin aborted the job:\n%s", logs)
	}
	if pids := plugins(t, os.Getpid()); len(pids) != 0 {
		t.Errorf("plugin processes %v outlived the aborted job", pids)
	}
}

func TestABadPluginBodyStopsTheJobAtItsLine(t *testing.T) {
	path := stack(t, `  mdoe = "good"`)
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{path}}, func(c *gobtl.Comm) error { return nil })
	if err == nil || !strings.Contains(err.Error(), path+":10:3: Unsupported argument") || !strings.Contains(err.Error(), `Did you mean "mode"?`) {
		t.Fatalf("RunLocal = %v, want the plugin body's diagnostic", err)
	}
	if pids := plugins(t, os.Getpid()); len(pids) != 0 {
		t.Errorf("plugin processes %v outlived the failed start", pids)
	}
}

// pluginFailures sums the plugin proxies' failure counters of c's job.
func pluginFailures(c *gobtl.Comm) int64 {
	var n int64
	for k, v := range c.Metrics().Snapshot() {
		if strings.HasPrefix(k, "plugin.") && strings.HasSuffix(k, ".failures") {
			if x, ok := v.(int64); ok {
				n += x
			}
		}
	}
	return n
}
