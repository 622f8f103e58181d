package experiment

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Env is what the command line gives an experiment: where its tables,
// progress and figures go, and how it starts rank processes.
type Env struct {
	Ctx context.Context
	// Out receives the tables.
	Out io.Writer
	// Progress receives a line per run and the estimate of the time left;
	// nil discards them.
	Progress io.Writer
	// Bar draws the progress as a bar (Progress is a terminal).
	Bar bool
	// Jobs starts jobs of rank processes; nil when there is no launcher,
	// and an experiment that needs one runs its ranks in this process or
	// fails.
	Jobs *Launcher
	// Plots is the directory figures are written to; "" writes none.
	Plots string
	// Reps is how many times each measurement runs; the median is
	// reported (0: the experiment's default).
	Reps int
	// Quick runs fewer points and shorter runs: under a minute per
	// experiment on a 2-core machine.
	Quick bool
	// Plugins runs the steps twice: with the policies built in, then with
	// the same policies as separately compiled plugins from PluginDir.
	Plugins bool
	// PluginDir holds the plugins (default: plugins/ beside the running
	// executable, else bin/plugins).
	PluginDir string
	// JSON, if set, receives the run as one JSON document at the end:
	// the checks of the papers' trends, the tables' records, the load.
	JSON io.Writer

	prog    *progress
	step    string
	plugin  bool // the steps run now use the plugins
	checks  []Check
	records []Record
	loadAt  [2]string
}

// Step is one of an experiment's parts: a table or a figure of the paper.
type Step struct {
	Name string
	// Runs is how many runs (jobs, or in-process runs) the step starts,
	// each announced with Env.Begin: the unit of the estimate of the time
	// left. A guess that is off only makes the estimate worse.
	Runs int
	Run  func() error
}

// Plan is an experiment set up with its options: what it prints first,
// then its steps in the order they run.
type Plan struct {
	Name   string
	Header string
	Steps  []Step
}

// StepNames lists the plan's steps in order.
func (p *Plan) StepNames() []string {
	names := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		names[i] = s.Name
	}
	return names
}

// Run runs the steps of p that only names (all when empty), in the
// plan's order, and prints after each how long it took. A step that fails
// ends the run.
func Run(e *Env, p *Plan, only []string) error {
	for _, n := range only {
		if !slices.ContainsFunc(p.Steps, func(s Step) bool { return s.Name == n }) {
			return fmt.Errorf("%s: no experiment %q (have %s)", p.Name, n, strings.Join(p.StepNames(), ", "))
		}
	}
	if e.Ctx == nil {
		e.Ctx = context.Background()
	}
	var steps []Step
	total := 0
	for _, s := range p.Steps {
		if len(only) == 0 || slices.Contains(only, s.Name) {
			steps = append(steps, s)
			total += s.Runs
		}
	}
	modes := []bool{false}
	if e.Plugins {
		modes = []bool{false, true}
		if _, err := e.pluginDir(); err != nil {
			return fmt.Errorf("%s: --plugins: %w", p.Name, err)
		}
	}
	start := time.Now()
	e.loadAt[0] = loadNow()
	fmt.Fprint(e.Out, p.Header)
	fmt.Fprintf(e.Out, "Machine: %d CPUs, load at start %s. Reps %d (the median is reported)%s.\n\n", runtime.NumCPU(), e.loadAt[0], max(e.Reps, 1), map[bool]string{true: ", quick mode", false: ""}[e.Quick])
	e.prog = newProgress(e.Progress, e.Bar, p.Name, total*len(modes))
	defer e.prog.finish()
	for _, plugin := range modes {
		e.plugin = plugin
		if e.Plugins {
			fmt.Fprintf(e.Out, "==== policies %s ====\n\n", e.Mode())
		}
		for _, s := range steps {
			at := time.Now()
			e.step = s.Name
			e.prog.startStep(s.Runs)
			if err := s.Run(); err != nil {
				if s.Name == p.Name {
					return fmt.Errorf("%s: %w", p.Name, err)
				}
				return fmt.Errorf("%s %s: %w", p.Name, s.Name, err)
			}
			e.prog.endStep()
			fmt.Fprintf(e.Out, "(%s took %v, load %s)\n\n", s.Name, time.Since(at).Round(100*time.Millisecond), loadNow())
		}
	}
	e.plugin = false
	e.loadAt[1] = loadNow()
	e.summary()
	if e.JSON != nil {
		return e.writeJSON(p, start)
	}
	return nil
}

// Launch returns the launcher of rank processes, or an error saying that
// the experiment needs one and there is none.
func (e *Env) Launch() (*Launcher, error) {
	if e.Jobs == nil {
		return nil, fmt.Errorf("the ranks are processes under gobtl run, and there is no launcher")
	}
	return e.Jobs, nil
}

// Begin announces a run: a line on the progress writer, and one more run
// toward the estimate of the time left.
func (e *Env) Begin(format string, args ...any) {
	if e.prog == nil {
		e.prog = newProgress(e.Progress, false, "", 0)
	}
	e.prog.begin(fmt.Sprintf(format, args...))
}
