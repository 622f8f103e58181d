package plugins

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/gobtl/gobtl/plugins/internal/wire"
)

// envHostPlugin names the plugin the "host" role opens.
const envHostPlugin = "GOBTL_TEST_HOST_PLUGIN"

// hostMain is a process that opens a plugin, says which (its pid and
// socket directory) and waits to be killed, as a rank the launcher
// stops does.
func hostMain() int {
	p, err := Open(context.Background(), Block{Kind: core.KindFlowControl, Path: os.Getenv(envHostPlugin), Pos: "host.hcl:1"}, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 1
	}
	fmt.Printf("plugin %d %s\n", p.Pid(), p.proc.sockDir)
	time.Sleep(2 * time.Minute) // killed long before
	return 1
}

// gone says whether pid has exited: no such process, or a zombie whose
// new parent has not reaped it yet.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses, which may hold
	// spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// tempEntries lists the plugin socket directories in dir.
func tempEntries(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, wire.SocketDirPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// shortTemp is a fresh directory for $TMPDIR with a short name: a unix
// socket's path (t.TempDir's names are long) has at most 107 bytes.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// A host killed outright (SIGKILL, or a SIGTERM it does not handle, as
// the launcher stops the other ranks of an aborted job) cannot remove its
// plugin's socket directory: the plugin notices its host is gone, removes
// the directory and exits, so an aborted job leaves no
// $TMPDIR/gobtl-plugin-* behind.
func TestAPluginWhoseHostIsKilledRemovesItsSocketDirectory(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := shortTemp(t)
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), mptest.EnvRole+"=host", envHostPlugin+"="+testBin("testpolicy"), "TMPDIR="+tmp)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			line, err := bufio.NewReader(out).ReadString('\n')
			var pid int
			var dir string
			if _, serr := fmt.Sscanf(line, "plugin %d %s", &pid, &dir); err != nil || serr != nil {
				cmd.Process.Kill()
				t.Fatalf("the host said %q (%v)", line, err)
			}
			if filepath.Dir(dir) != tmp {
				t.Fatalf("the socket directory %s is not in $TMPDIR %s", dir, tmp)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			msgtest.Until(t, "the plugin to exit", 20*time.Second, func() bool { return gone(pid) })
			msgtest.Until(t, "the socket directory to go", 10*time.Second, func() bool { return len(tempEntries(t, tmp)) == 0 })
		})
	}
}

// A binary that never answers the handshake, and whose children hold its
// output open, is killed with its whole process group at the deadline:
// Open returns then (not when the children exit, a thousand seconds
// later), nothing it started survives, and its socket directory is gone.
//
// The script must have started its child before the deadline kills it;
// a loaded machine can take longer than the first deadline to start a
// shell, and then the deadline is tried again, four times longer.
func TestAPluginThatNeverAnswersIsKilledWithItsGroupAtTheDeadline(t *testing.T) {
	for deadline := 500 * time.Millisecond; ; deadline *= 4 {
		if silentPluginAtTheDeadline(t, deadline) {
			return
		}
		if deadline >= 32*time.Second {
			t.Fatalf("the script did not start its child within %v, five times", deadline)
		}
		t.Logf("the script did not start its child within %v; trying a longer deadline", deadline)
	}
}

// silentPluginAtTheDeadline runs the test with one handshake deadline; it
// returns false, having checked what it could, when the script had not
// started its child by then.
func silentPluginAtTheDeadline(t *testing.T, deadline time.Duration) bool {
	dir := t.TempDir()
	tmp := shortTemp(t)
	t.Setenv("TMPDIR", tmp)
	childPid := filepath.Join(dir, "child")
	bin := filepath.Join(dir, "silent")
	script := "#!/bin/sh\nsleep 1000 &\necho $! > " + childPid + ".tmp\nmv " + childPid + ".tmp " + childPid + "\nsleep 1000\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	log, _ := testLogger()
	done := make(chan error, 1)
	go func() {
		p, err := Open(context.Background(), Block{Kind: core.KindFlowControl, Path: bin, Pos: "silent.hcl:2"}, Options{Log: log, StartTimeout: deadline})
		if err == nil {
			p.Close()
		}
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(deadline + 60*time.Second):
		// The children sleep 1000 s: Open is waiting for them.
		t.Fatalf("Open did not return at the handshake deadline (%v) but waits for the plugin's children", deadline)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("no plugin handshake within %v", deadline)) {
		t.Fatalf("Open = %v, want a missed handshake", err)
	}
	if left := tempEntries(t, tmp); len(left) != 0 {
		t.Fatalf("the aborted plugin left %v", left)
	}
	b, rerr := os.ReadFile(childPid)
	if errors.Is(rerr, os.ErrNotExist) {
		return false
	}
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("child pid %q", b)
	}
	msgtest.Until(t, "the plugin's child to be killed", 20*time.Second, func() bool { return gone(pid) })
	return true
}

// Neither a job's Open nor config check's Check runs an executable whose
// pin does not match: the executable, which would leave a mark, never
// runs, whether named by path or found by name in plugin_dir.
func TestNoExecutableRunsWhosePinDoesNotMatch(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	bin := filepath.Join(dir, "evil")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pin := strings.Repeat("ab", 32)
	for _, b := range []Block{
		{Kind: core.KindSched, Path: bin, SHA256: pin},
		{Kind: core.KindSched, Plugin: "evil", PluginDir: dir, SHA256: pin},
		{Kind: core.KindFlowControl, Plugin: "evil", PluginDir: dir, SHA256: "sha256:" + pin, OnFailure: "fallback"},
	} {
		for name, f := range map[string]func() error{
			"Open": func() error {
				p, err := Open(context.Background(), b, Options{})
				if err == nil {
					p.Close()
				}
				return err
			},
			"Check": func() error { return Check(context.Background(), b, Options{}) },
		} {
			err := f()
			if err == nil || !strings.Contains(err.Error(), "the stack file pins") {
				t.Errorf("%s of %+v = %v, want a pin mismatch", name, b, err)
			}
			if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s ran the executable although its pin did not match (%v)", name, err)
			}
		}
	}
}
