// Package experiment is what the papers' experiments share. Each
// subpackage runs one paper's experiments and prints its tables next to
// the paper's numbers: flowcontrol (seed 000 §6), multirail (seed 001 §6),
// recvbuf (seed 002 §4), extoll (seed 003 §5–7) and overlap (seed 004
// §5.1, with ibperf beside it). `gobtl experiment NAME` runs one.
// Beside them, simjob runs a job on simulated ranks in virtual time
// (`gobtl sim`, and the simulated runs of extoll and scale).
//
// An experiment registers itself here (Register): its name, its help,
// and the rank program its jobs run, if it has one. Set up with its
// options it is a Plan: a header and named steps, each one of the paper's
// tables or figures. Run runs the steps a command line names, in order,
// times each and shows how far the whole is with an estimate of the time
// left. Rank processes are started one way for every experiment, by a
// Launcher: `gobtl run -np N -c STACK -- gobtl bench ...` for the
// benchmark suite, `gobtl run ... -- gobtl experiment rank NAME --spec
// JSON` for an experiment's own rank program. Figures go through
// internal/plot (Env.Figure, Env.Panels), which bench/compare shares.
package experiment

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/gobtl/gobtl/bench"
)

// Experiment is one paper's experiments as the command line knows them.
type Experiment struct {
	// Name is the command: gobtl experiment NAME.
	Name string
	// Short and Long are its help.
	Short, Long string
	// Rank is the program each rank of the experiment's jobs runs (gobtl
	// experiment rank NAME), nil when its jobs run the benchmark suite or
	// its ranks are goroutines.
	Rank RankFunc
	// Reps is the default of --reps.
	Reps int
}

// RankFunc is one rank of an experiment's job: spec is the JSON the
// experiment gave its launcher, out the rank's standard output, where
// rank 0 prints its results as JSON lines.
type RankFunc func(c bench.Comm, spec []byte, out io.Writer) error

// RankOf is the RankFunc of fn, whose spec decodes from JSON into S.
func RankOf[S any](fn func(c bench.Comm, spec S, out io.Writer) error) RankFunc {
	return func(c bench.Comm, raw []byte, out io.Writer) error {
		var s S
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("experiment: rank spec %s: %w", raw, err)
		}
		return fn(c, s, out)
	}
}

// Progress is the progress block of the job blocks the experiments over
// ib/softrc write: the ranks share the machine's two cores with their
// device goroutines, so a waiting rank yields soon and the others get a
// core (seed 004 ran its overlap tests on a uniprocessor kernel for the
// same reason).
const Progress = `  progress {
    spin      = 50
    yield     = 10
    sleep     = "10us"
    max_sleep = "200us"
  }
`

var registry = map[string]*Experiment{}

// Register adds e to the experiments; it panics on a name taken twice.
// Subpackages call it when their package variables are set up.
func Register(e *Experiment) *Experiment {
	if _, dup := registry[e.Name]; dup {
		panic("experiment: " + e.Name + " registered twice")
	}
	registry[e.Name] = e
	return e
}

// Lookup returns the experiment called name.
func Lookup(name string) (*Experiment, bool) {
	e, ok := registry[name]
	return e, ok
}

// Names lists the registered experiments, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
