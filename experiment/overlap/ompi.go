package overlap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/experiment"
)

// Open MPI's commands, by their full names: on Debian `mpirun` may be
// another MPI's (the alternatives system), and ob1/tcp is Open MPI's.
const (
	ompiRun = "mpirun.openmpi"
	ompiCC  = "mpicc.openmpi"
)

// ompi runs bench/c/osu.c under Open MPI's ob1 PML over its tcp BTL on
// loopback: the reference of ibperf, measured in the same run.
type ompi struct {
	run, bin string
}

// findOMPI builds osu.c with Open MPI in dir. It returns why there is no
// reference when Open MPI is not installed or the build fails.
func findOMPI(ctx context.Context, dir string) (*ompi, string) {
	run, err := exec.LookPath(ompiRun)
	if err != nil {
		return nil, ompiRun + " is not installed (Debian: openmpi-bin libopenmpi-dev)"
	}
	cc, err := exec.LookPath(ompiCC)
	if err != nil {
		return nil, ompiCC + " is not installed (Debian: libopenmpi-dev)"
	}
	src := filepath.Join(dir, "osu.c")
	if err := os.WriteFile(src, bench.OSUSource, 0o644); err != nil {
		return nil, err.Error()
	}
	bin := filepath.Join(dir, "osu-ompi")
	if out, err := exec.CommandContext(ctx, cc, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("%s failed: %v: %s", ompiCC, err, strings.TrimSpace(string(out)))
	}
	return &ompi{run: run, bin: bin}, ""
}

// bench runs `osu ARGS` on two ranks over ob1/tcp and returns its report.
func (o *ompi) bench(ctx context.Context, args ...string) (experiment.Report, error) {
	a := []string{"-np", "2"}
	if os.Geteuid() == 0 {
		a = append(a, "--allow-run-as-root")
	}
	a = append(a, "--oversubscribe", "--mca", "pml", "ob1", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", o.bin)
	c := exec.CommandContext(ctx, o.run, append(a, args...)...)
	out, err := c.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return experiment.Report{}, fmt.Errorf("%s: %w: %s", strings.Join(c.Args, " "), err, msg)
	}
	lines := experiment.JSONLines(out)
	if len(lines) == 0 {
		return experiment.Report{}, fmt.Errorf("%s: no JSON report in %q", strings.Join(c.Args, " "), out)
	}
	return experiment.ParseReport(lines[0])
}
