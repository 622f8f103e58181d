package launch

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/internal/topo"
)

// Placement is how the launcher maps the ranks onto this host's cores
// and binds them, as mpirun's --map-by, --bind-to and --report-bindings.
// The zero value is the default: ranks fill the cores in order, each
// bound to its core when every rank gets one; with more ranks than cores
// none is bound (they share the cores and yield while they wait) and the
// launcher says so.
type Placement struct {
	// MapBy is "core" (or ""), "numa" or "socket".
	MapBy string
	// BindTo is "core", "numa", "socket", "none", or "" / "auto" for the
	// default.
	BindTo string
	// Report prints each rank's binding before the ranks start.
	Report bool
}

// Check reports a value of MapBy or BindTo that is not a level.
func (p Placement) Check() error {
	_, err := p.policy()
	return err
}

func (p Placement) policy() (topo.Policy, error) {
	pol := topo.Policy{Report: p.Report}
	var err error
	if p.MapBy != "" {
		if pol.MapBy, err = topo.ParseLevel(p.MapBy, topo.MapLevels); err != nil {
			return pol, fmt.Errorf("map by: %w", err)
		}
	}
	if p.BindTo != "" && p.BindTo != "auto" {
		if pol.BindTo, err = topo.ParseLevel(p.BindTo, topo.BindLevels); err != nil {
			return pol, fmt.Errorf("bind to: %w", err)
		}
	}
	return pol, nil
}

// place works out the job's placement within the CPUs the launcher was
// given (its own affinity: taskset, a cgroup's cpuset): each rank's CPUs
// (nil: not bound) and what every rank's environment says of it
// (topo.EnvNodeCPUs, topo.EnvBind). It tells report what a user should
// know: ranks that are not bound for want of cores, and with
// Placement.Report, every rank's binding.
func place(cfg Config, report io.Writer) (masks []topo.CPUs, env []string, err error) {
	pol, err := cfg.Place.policy()
	if err != nil {
		return nil, nil, err
	}
	allowed, err := topo.Affinity()
	if err != nil {
		return nil, nil, err
	}
	env = []string{topo.EnvNodeCPUs + "=" + allowed.String(), topo.EnvBind + "=none"}
	t, err := topo.Read(topo.Sys)
	if err != nil {
		if pol.BindTo != topo.LevelDefault && pol.BindTo != topo.LevelNone {
			return nil, nil, err
		}
		fmt.Fprintf(report, "gobtl run: no rank is bound: %v\n", err)
		return nil, env, nil
	}
	t = t.Within(allowed)
	plan, err := pol.Place(t, cfg.NP)
	if err != nil {
		return nil, nil, err
	}
	if plan.Note != "" {
		fmt.Fprintf(report, "gobtl run: %s\n", plan.Note)
	}
	if plan.Slots != nil {
		bind := pol.BindTo
		if bind == topo.LevelDefault {
			bind = topo.LevelCore
		}
		env[1] = topo.EnvBind + "=" + bind.String()
		masks = make([]topo.CPUs, cfg.NP)
		for r, s := range plan.Slots {
			masks[r] = s.CPUs
		}
	}
	if pol.Report {
		for r := range cfg.NP {
			if masks == nil {
				fmt.Fprintf(report, "gobtl run: rank %d not bound (cpus %v)\n", r, allowed)
				continue
			}
			fmt.Fprintf(report, "gobtl run: rank %d bound to %s: %s\n", r, t.Describe(masks[r]), t.Draw(masks[r]))
		}
	}
	return masks, env, nil
}

// startOn starts cmd with the affinity cpus (nil: the launcher's own), so
// that the rank's whole runtime starts bound: the calling goroutine's
// thread takes the mask for the fork — the child inherits its creator
// thread's mask, and exec keeps it — and gets its own back after.
// Threads the runtime makes meanwhile come from its template thread, not
// this locked one, so no other thread of the launcher is bound.
func startOn(cmd *exec.Cmd, cpus topo.CPUs) error {
	if cpus == nil {
		return cmd.Start()
	}
	set, err := cpus.Set()
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		return fmt.Errorf("bind to cpus %v: sched_getaffinity: %w", cpus, err)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bind to cpus %v: sched_setaffinity: %w", cpus, err)
	}
	err = cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &own); rerr != nil && err == nil {
		// The launcher's thread did not get its mask back: the job stops
		// as for any rank that failed to start, this one with it.
		cmd.Process.Kill()
		cmd.Wait()
		err = fmt.Errorf("unbind the launcher's thread: sched_setaffinity: %w", rerr)
	}
	return err
}
