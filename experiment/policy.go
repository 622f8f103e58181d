package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
)

// Mode says how the policies of the steps running now are run: "builtin"
// (compiled in, called in process) or "plugin" (the same policy code as a
// separately compiled plugin in its own process, plugins/<name>/main.go).
func (e *Env) Mode() string {
	if e.plugin {
		return "plugin"
	}
	return "builtin"
}

// pluginDir is where the plugins are: PluginDir, else plugins/ beside
// the running executable (bin/gobtl, bin/plugins), else bin/plugins.
func (e *Env) pluginDir() (string, error) {
	var dirs []string
	if e.PluginDir != "" {
		dirs = append(dirs, e.PluginDir)
	} else {
		if exe, err := os.Executable(); err == nil {
			dirs = append(dirs, filepath.Join(filepath.Dir(exe), "plugins"))
		}
		dirs = append(dirs, plugins.DefaultDir)
	}
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return filepath.Abs(d)
		}
	}
	return "", fmt.Errorf("no plugin directory (searched %s; make plugins builds them)", strings.Join(dirs, ", "))
}

// PolicyLines are the lines of a policy block that choose the policy
// called name: `builtin = "name"`, or in plugin mode the plugin of that
// name from the plugin directory, and a failed plugin fails the job
// rather than falling back to the built-in (which would measure the
// built-in under the plugin's label).
func (e *Env) PolicyLines(name string) string {
	if !e.plugin {
		return fmt.Sprintf("  builtin = %q\n", name)
	}
	dir, err := e.pluginDir()
	if err != nil {
		dir = plugins.DefaultDir // Run checked it; the job will say what is missing
	}
	return fmt.Sprintf("  plugin     = %q\n  plugin_dir = %q\n  on_failure = \"abort\"\n", name, dir)
}

// OpenPolicy opens the policy of kind called name with params for a rank
// that runs in this process: the built-in, or in plugin mode the plugin
// (which aborts, as in a stack file that says so, rather than fall back).
// Close the returned closer when the rank is done.
func (e *Env) OpenPolicy(kind core.Kind, name string, params core.Params) (any, io.Closer, error) {
	b := &plugins.Block{Kind: kind, Builtin: name, Params: params, OnFailure: "abort", Pos: "experiment"}
	if e.plugin {
		dir, err := e.pluginDir()
		if err != nil {
			return nil, nil, err
		}
		b.Builtin, b.Plugin, b.PluginDir = "", name, dir
	}
	ctx := e.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	p, err := plugins.Open(ctx, *b, plugins.Options{Abort: func(error) {}})
	if err != nil {
		return nil, nil, fmt.Errorf("experiment: %s policy %s: %w", kind, name, err)
	}
	if p.Impl() == nil {
		p.Close()
		return nil, nil, errors.New("experiment: policy " + name + " opened without an implementation")
	}
	return p.Impl(), p, nil
}

// Record is one row of a table, for --json.
type Record struct {
	Step  string `json:"step"`
	Mode  string `json:"mode"`
	Table string `json:"table"`
	Row   any    `json:"row"`
}

// Record keeps a row of a table for the JSON document (--json).
func (e *Env) Record(table string, row any) {
	e.records = append(e.records, Record{Step: e.step, Mode: e.Mode(), Table: table, Row: jsonValue(reflect.ValueOf(row))})
}

// Median is the median of v (the mean of the middle two for an even
// count); NaN for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return nan
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

var nan = func() float64 { var z float64; return z / z }()

// Repeat is how many times a measurement runs: Reps, at least once.
func (e *Env) Repeat() int { return max(e.Reps, 1) }

// loadNow is the load average, as uptime prints it.
func loadNow() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (e *Env) loadNote() string {
	return fmt.Sprintf("%d CPUs, load %s at start, %s at the end", runtime.NumCPU(), e.loadAt[0], e.loadAt[1])
}

// writeJSON writes the run as one JSON document.
func (e *Env) writeJSON(p *Plan, start time.Time) error {
	host, _ := os.Hostname()
	doc := struct {
		Experiment string    `json:"experiment"`
		Host       string    `json:"host"`
		CPUs       int       `json:"cpus"`
		Start      time.Time `json:"start"`
		Seconds    float64   `json:"seconds"`
		Load       [2]string `json:"load"` // at start and at the end (1, 5, 15 min)
		Reps       int       `json:"reps"`
		Quick      bool      `json:"quick"`
		Plugins    bool      `json:"plugins"`
		Summary    Summary   `json:"summary"`
		Checks     any       `json:"checks"` // a value not measured (NaN) is null
		Records    []Record  `json:"records"`
	}{p.Name, host, runtime.NumCPU(), start, time.Since(start).Seconds(), e.loadAt, e.Repeat(), e.Quick, e.Plugins, e.counts(), jsonValue(reflect.ValueOf(e.checks)), e.records}
	enc := json.NewEncoder(e.JSON)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
