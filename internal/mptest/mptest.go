// Package mptest is the harness of gobtl's multi-process tests: it starts
// jobs whose ranks are processes, with the launcher.
//
// A package whose ranks are processes makes its test binary double as
// its rank program: its TestMain is Main, with the roles a rank can play,
// and a test starts a Job — n ranks of the test binary in one role, under
// the launcher (package launch, what `gobtl run` runs), with the
// bootstrap, a stack file and a fresh job id of the launcher's, so that
// two test runs on one host never share a socket or a /dev/shm name. A
// job has a deadline: a rank that cannot get what it needs ends the job,
// and a job that hangs is stopped and fails its test at once, instead of
// holding the test binary until go test's own timeout. Tests of the gobtl
// command itself get it from Gobtl, built once per test binary.
//
// It starts jobs and builds what they run; the payload, the waits and the job
// ids of a test that opens transports itself are package msgtest's, a
// leaf, so that a test of a transport (and the BTL suite) links no
// launcher. The harness imports testing: it is linked into tests only.
package mptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl/launch"
)

// EnvRole names the role a rank of a Job plays; Main runs it.
const EnvRole = "GOBTL_MPTEST_ROLE"

// Main is the TestMain of a package whose test binary is also its rank
// program: a process started as a rank (EnvRole set) plays its role and
// exits with the role's status. Otherwise Main runs setup, if not nil
// (building what the tests start, say), then the tests, then the cleanup
// setup returned, and removes what the harness built. An interrupt or a
// termination (Ctrl-C, a kill of the test run) does the same cleanup before
// the binary dies of the signal, so a stopped run leaves no build behind in
// the temporary directory.
func Main(m *testing.M, roles map[string]func() int, setup func() (cleanup func(), err error)) {
	if role := os.Getenv(EnvRole); role != "" {
		f, ok := roles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "mptest: this test binary has no role %q\n", role)
			os.Exit(99)
		}
		os.Exit(f())
	}
	cleanup := func() {}
	if setup != nil {
		c, err := setup()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cleanup = c
	}
	var once sync.Once
	tidy := func() {
		once.Do(func() {
			cleanup()
			// A Do of its own orders this read after Gobtl's build, or
			// stops one from starting now.
			built.once.Do(func() {})
			if built.dir != "" {
				os.RemoveAll(built.dir)
			}
		})
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := (<-sig).(syscall.Signal)
		tidy()
		signal.Reset(s)
		syscall.Kill(os.Getpid(), s)
	}()
	code := m.Run()
	signal.Stop(sig)
	tidy()
	os.Exit(code)
}

// DefaultTimeout bounds a Job that sets no Timeout.
const DefaultTimeout = 2 * time.Minute

// Job is NP ranks of this test binary playing Role.
type Job struct {
	NP   int
	Role string
	// Stack is the stack file the ranks' gobtl.Init reads ("": the
	// default stack).
	Stack string
	// Env is added to every rank's environment.
	Env []string
	// Wrap is a command line each rank runs under, the test binary last
	// (a shell that enters a network namespace, say).
	Wrap []string
	// Timeout stops the job and fails the test (DefaultTimeout when 0,
	// and never past the test's own deadline).
	Timeout time.Duration
	// Command starts the job with the gobtl command (`gobtl run`, built
	// by Gobtl) instead of the launcher package: for tests of the command
	// itself. Result.Exits is empty then.
	Command bool
}

// Result is how a job ended and what its ranks printed.
type Result struct {
	launch.Result
	// Stdout holds the ranks' standard output; Stderr theirs and the
	// launcher's report ("gobtl run: rank 1 ... was killed by signal 9").
	Stdout, Stderr string
	Took           time.Duration
}

// Failed says whether a rank failed or the job was stopped.
func (r Result) Failed() bool { return r.Status != 0 }

// String is everything the job printed, for a failure message.
func (r Result) String() string {
	return fmt.Sprintf("status %d after %v\nstdout:\n%s\nstderr:\n%s", r.Status, r.Took.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// Run starts the job and waits for it to end. It fails t when the job
// could not start or ran into its timeout; how the ranks ended is for the
// test to judge.
func (j Job) Run(t testing.TB) Result {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	timeout := j.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		// Leave the test time to report what the job said.
		if end, ok := d.Deadline(); ok {
			timeout = min(timeout, time.Until(end)-5*time.Second)
		}
	}
	args := append(append([]string(nil), j.Wrap...), self)
	env := append([]string{EnvRole + "=" + j.Role}, j.Env...)
	var stdout, stderr bytes.Buffer
	gobtl := ""
	if j.Command {
		gobtl = Gobtl(t) // built before the clock starts
	}
	start := time.Now()
	var res launch.Result
	if j.Command {
		res.Status, err = j.command(gobtl, timeout, env, args, &stdout, &stderr)
	} else {
		res, err = launch.Run(context.Background(), launch.Config{
			NP: j.NP, Prog: args[0], Args: args[1:], StackFile: j.Stack, Timeout: timeout,
			Env: env, Stdout: &stdout, Stderr: &stderr,
		})
	}
	r := Result{Result: res, Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(start)}
	if err != nil {
		t.Fatalf("mptest: the launcher failed: %v\n%s", err, r)
	}
	if res.Status == launch.StatusTimeout {
		t.Fatalf("mptest: job %s of %d ranks ran into its %v timeout\n%s", j.Role, j.NP, timeout, r)
	}
	return r
}

// command runs the job with `gobtl run` and returns its exit status.
func (j Job) command(gobtl string, timeout time.Duration, env, prog []string, stdout, stderr io.Writer) (int, error) {
	args := []string{"run", "-np", fmt.Sprint(j.NP), "--timeout", timeout.String()}
	if j.Stack != "" {
		args = append(args, "-c", j.Stack)
	}
	cmd := exec.Command(gobtl, append(append(args, "--"), prog...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), nil
	case err != nil:
		return 0, err
	}
	return 0, nil
}
