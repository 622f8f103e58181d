// Package engines tests gobtl jobs started by the engines HPC sites run —
// Open MPI's mpirun (PMIx), Slurm's srun (PMIx and PMI-2) and MPICH's
// mpiexec.hydra (PMI-1) — on one host, and by mpirun across two "hosts"
// made of network and UTS namespaces (hosts_test.go).
//
// The tests need root and the engines' packages (`make engines` installs
// them and brings up the one-node Slurm of scripts/slurm-up.sh); without
// them they skip and say why. The programs they start are built once by
// TestMain, with PMIx support (build tag pmix) when libpmix-dev is there
// and libfabric's (ofi) when libfabric-dev is:
// the ring example, the gobtl command and testdata/rank, a rank program
// that reports its Init time and fails on request.
package engines

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl/internal/mptest"
)

// bins holds what TestMain built: ring, gobtl, rank.
var bins struct {
	dir  string
	pmix bool // built with the pmix tag
	ofi  bool // built with the ofi tag (libfabric)
}

func TestMain(m *testing.M) {
	mptest.Main(m, nil, func() (func(), error) {
		dir, err := os.MkdirTemp("", "gobtl-engines-")
		if err != nil {
			return nil, err
		}
		cleanup := func() { os.RemoveAll(dir) }
		args := []string{dir + string(filepath.Separator)}
		// Without libpmix-dev the programs build without PMIx; the tests
		// that need it skip.
		var tags []string
		if exec.Command("pkg-config", "--exists", "pmix").Run() == nil {
			bins.pmix = true
			tags = append(tags, "pmix")
		}
		// With libfabric-dev they have btl ofi (twohosts_ofi_test.go).
		if exec.Command("pkg-config", "--exists", "libfabric").Run() == nil {
			bins.ofi = true
			tags = append(tags, "ofi")
		}
		if len(tags) > 0 {
			args = append(args, "-tags="+strings.Join(tags, ","))
		}
		args = append(args, "./examples/ring", "./cmd/gobtl", "./test/engines/testdata/rank")
		if err := mptest.Build("../..", args[0], args[1:]...); err != nil {
			cleanup()
			return nil, err
		}
		bins.dir = dir
		return cleanup, nil
	})
}

// bin is the path of a program TestMain built.
func bin(name string) string { return filepath.Join(bins.dir, name) }

// needRoot skips a test that is not running as root.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("engines: not root (the engines run as root here, and the two-host test makes namespaces)")
	}
}

// needCommands skips a test when a command it runs is missing.
func needCommands(t testing.TB, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("engines: %s is not installed (`make engines` installs the engines)", c)
		}
	}
}

// engine is one way to start a job: the command line that starts np
// ranks of a program, and what it needs to be there.
type engine struct {
	name string
	// pmix: the ranks find their job through PMIx, which the programs
	// have only when built with the pmix tag.
	pmix  bool
	needs []string
	argv  func(job string, np int) []string
	// slurm: the job runs under the one-node Slurm.
	slurm bool
}

// The engines on one host. The Open MPI and MPICH launchers are called by
// their full names: with both installed, the unsuffixed ones follow
// Debian's alternatives.
var (
	mpirun = engine{name: "mpirun", pmix: true, needs: []string{"mpirun.openmpi"}, argv: func(_ string, np int) []string {
		return []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(np)}
	}}
	srunPMIx = engine{name: "srun-pmix", pmix: true, slurm: true, needs: []string{"srun"}, argv: func(job string, np int) []string {
		return srun(job, "pmix", np)
	}}
	srunPMI2 = engine{name: "srun-pmi2", slurm: true, needs: []string{"srun"}, argv: func(job string, np int) []string {
		return srun(job, "pmi2", np)
	}}
	hydra = engine{name: "mpiexec.hydra", needs: []string{"mpiexec.hydra"}, argv: func(_ string, np int) []string {
		return []string{"mpiexec.hydra", "-launcher", "fork", "-np", fmt.Sprint(np)}
	}}
	allEngines = []engine{mpirun, srunPMIx, srunPMI2, hydra}
)

// srun starts a step of its own allocation, named after the test's job
// so that cleanup can cancel it; a rank that fails ends the step (-K),
// and the time limit is Slurm's own bound on a job the test lost.
func srun(job, mpi string, np int) []string {
	return []string{"srun", "--mpi=" + mpi, "-J", job, "-n", fmt.Sprint(np), "--oversubscribe", "--kill-on-bad-exit=1", "--time=5", "--quiet"}
}

// need skips t unless e can run here.
func (e engine) need(t testing.TB) {
	t.Helper()
	needRoot(t)
	needCommands(t, e.needs...)
	if e.pmix && !bins.pmix {
		t.Skipf("engines: %s needs PMIx and libpmix-dev is not installed (`make engines` installs it)", e.name)
	}
	if e.slurm {
		slurmUp(t)
	}
}

var slurmChecked atomic.Bool

// slurmUp makes sure the one-node Slurm answers, starting it with
// scripts/slurm-up.sh (idempotent, shared with other test runs) if not.
func slurmUp(t testing.TB) {
	t.Helper()
	if slurmChecked.Load() {
		return
	}
	out, err := exec.Command("../../scripts/slurm-up.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("engines: scripts/slurm-up.sh: %v\n%s", err, out)
	}
	if out, err := exec.Command("srun", "--mpi=list").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("pmix")) || !bytes.Contains(out, []byte("pmi2")) {
		t.Fatalf("engines: srun --mpi=list does not offer pmix and pmi2: %v\n%s", err, out)
	}
	slurmChecked.Store(true)
}

var jobSeq atomic.Int64

// jobName is a name no other job on the machine has: Slurm's job name,
// so that a test cancels only its own.
func jobName() string {
	return fmt.Sprintf("gobtl-test-%d-%d", os.Getpid(), jobSeq.Add(1))
}

// result is how an engine's job ended.
type result struct {
	status         int
	stdout, stderr string
	took           time.Duration
	// ended is when the engine's command returned.
	ended time.Time
}

func (r result) String() string {
	return fmt.Sprintf("status %d after %v\nstdout:\n%s\nstderr:\n%s", r.status, r.took.Round(time.Millisecond), clip(r.stdout), clip(r.stderr))
}

// clip keeps a failure message readable: the start and the end of what
// a job printed.
func clip(s string) string {
	const keep = 3000
	if len(s) <= 2*keep {
		return s
	}
	return fmt.Sprintf("%s\n[... %d bytes ...]\n%s", s[:keep], len(s)-2*keep, s[len(s)-keep:])
}

// hardDeadline bounds every job: a job that hangs fails its test at once
// instead of holding go test until its own timeout.
const hardDeadline = 90 * time.Second

// start runs argv (an engine's command line, then the program and its
// arguments) with env added, and waits for it to end or for the hard
// deadline, when it stops the engine (SIGTERM, which mpirun and srun
// pass on to the ranks, then SIGKILL) and fails t. wrap, if set, is a
// command line the engine itself runs under (entering a namespace).
func start(t testing.TB, e engine, job string, wrap, argv, env []string) result {
	t.Helper()
	full := append(append([]string(nil), wrap...), argv...)
	ctx, cancel := context.WithTimeout(context.Background(), hardDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, fmt.Sprintf("GOBTL_TEST_T0=%d", time.Now().UnixNano()))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	begin := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(begin), ended: time.Now()}
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the engine left behind
	}
	if e.slurm {
		exec.Command("scancel", "-n", job).Run()
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("engines: %s did not end within %v\n%s", strings.Join(full, " "), hardDeadline, r)
	case errors.As(err, &ee):
		r.status = ee.ExitCode()
		if r.status < 0 { // killed by a signal
			r.status = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
	case err != nil:
		t.Fatalf("engines: %s: %v\n%s", strings.Join(full, " "), err, r)
	}
	return r
}

// run starts np ranks of prog with args under e on this host.
func run(t testing.TB, e engine, np int, env []string, prog string, args ...string) result {
	t.Helper()
	job := jobName()
	return start(t, e, job, nil, append(append(e.argv(job, np), prog), args...), env)
}

// initLine is one rank's report from testdata/rank.
type initLine struct {
	rank, size     int
	host           string
	launch, doInit time.Duration
}

var initRE = regexp.MustCompile(`(?m)^init rank=(\d+) size=(\d+) host=(\S*) launch_ns=(\d+) init_ns=(\d+)$`)

// inits reads every rank's init line from a job's output and checks that
// the ranks are 0..np-1 of an np-rank job, each once.
func inits(t testing.TB, r result, np int) []initLine {
	t.Helper()
	lines := make([]initLine, np)
	seen := make([]bool, np)
	for _, m := range initRE.FindAllStringSubmatch(r.stdout, -1) {
		rank, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		launch, _ := strconv.ParseInt(m[4], 10, 64)
		in, _ := strconv.ParseInt(m[5], 10, 64)
		if size != np || rank < 0 || rank >= np || seen[rank] {
			t.Fatalf("engines: rank %d of %d reported where %d ranks were started\n%s", rank, size, np, r)
		}
		seen[rank] = true
		lines[rank] = initLine{rank, size, m[3], time.Duration(launch), time.Duration(in)}
	}
	for rank, ok := range seen {
		if !ok {
			t.Fatalf("engines: rank %d of %d did not report its Init\n%s", rank, np, r)
		}
	}
	return lines
}
