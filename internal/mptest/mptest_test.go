package mptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/internal/msgtest"
)

func TestMain(m *testing.M) {
	Main(m, map[string]func() int{
		"hello": func() int {
			fmt.Printf("rank %s of %s in job %s\n", os.Getenv(boot.EnvRank), os.Getenv(boot.EnvSize), os.Getenv(boot.EnvJobID))
			return 0
		},
		"fail": func() int { return 3 },
		"hang": func() int { time.Sleep(time.Minute); return 0 },
	}, func() (func(), error) {
		if os.Getenv(envSignalled) == "" {
			return func() {}, nil
		}
		var err error
		signalledDir, err = os.MkdirTemp("", "gobtl-mptest-signalled-")
		return func() { os.RemoveAll(signalledDir) }, err
	})
}

// envSignalled names the file a test run started by
// TestAStoppedRunCleansUpBehindItself writes its setup's directory to.
const envSignalled = "GOBTL_MPTEST_SIGNALLED"

// signalledDir is what setup made in such a run.
var signalledDir string

// The run a signal stops: it says where its setup's directory is, then
// waits to be stopped.
func TestWaitsForASignal(t *testing.T) {
	path := os.Getenv(envSignalled)
	if path == "" {
		t.Skip("run by TestAStoppedRunCleansUpBehindItself")
	}
	if err := os.WriteFile(path, []byte(signalledDir), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Minute)
	t.Fatal("no signal came")
}

// A test run stopped by Ctrl-C or a kill removes what its setup made, and
// still dies of the signal.
func TestAStoppedRunCleansUpBehindItself(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		said := filepath.Join(t.TempDir(), "dir")
		cmd := exec.Command(os.Args[0], "-test.run=^TestWaitsForASignal$", "-test.count=1")
		cmd.Env = append(os.Environ(), envSignalled+"="+said)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		var dir []byte
		msgtest.Until(t, "the run to start", 30*time.Second, func() bool {
			dir, _ = os.ReadFile(said)
			return len(dir) > 0
		})
		if _, err := os.Stat(string(dir)); err != nil {
			t.Fatalf("setup's directory: %v", err)
		}
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
			t.Fatalf("%v: the run ended with %v, want death by the signal", sig, err)
		}
		if _, err := os.Stat(string(dir)); !os.IsNotExist(err) {
			os.RemoveAll(string(dir))
			t.Fatalf("%v: the run left %s behind (%v)", sig, dir, err)
		}
	}
}

func TestAJobRunsItsRanksInTheirRoleWithAFreshJobID(t *testing.T) {
	var jobs []string
	for range 2 {
		r := Job{NP: 3, Role: "hello"}.Run(t)
		if r.Failed() || strings.Count(r.Stdout, "rank ") != 3 || !strings.Contains(r.Stdout, "rank 2 of 3") {
			t.Fatalf("ranks did not all say hello:\n%s", r)
		}
		_, job, _ := strings.Cut(r.Stdout, "in job ")
		jobs = append(jobs, strings.Fields(job)[0])
	}
	if jobs[0] == jobs[1] {
		t.Fatalf("two jobs share the id %s", jobs[0])
	}
}

func TestAFailedRankFailsTheJob(t *testing.T) {
	r := Job{NP: 2, Role: "fail"}.Run(t)
	if !r.Failed() || !strings.Contains(r.Stderr, "exited with status 3") {
		t.Fatalf("a rank that exits 3:\n%s", r)
	}
}

// A job that runs into its timeout fails its test instead of hanging it.
func TestAJobThatHangsFailsAtItsTimeout(t *testing.T) {
	var ft fatalT
	func() {
		defer func() { recover() }()
		Job{NP: 2, Role: "hang", Timeout: 300 * time.Millisecond}.Run(&ft)
	}()
	if !strings.Contains(ft.msg, "ran into its 300ms timeout") {
		t.Fatalf("a hung job: %q", ft.msg)
	}
}

// fatalT records what a harness function fails a test with.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}
