package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Launcher starts an experiment's jobs: `gobtl run -np N -c STACK --
// gobtl ARGS`, the stack written to a file of its own in a directory the
// launcher owns. Jobs may run concurrently (the multirail load experiment
// runs two at once).
type Launcher struct {
	gobtl string
	dir   string
	seq   atomic.Int64
}

// NewLauncher returns a launcher that runs the gobtl executable at path
// (os.Executable() for the running command). Close removes its files.
func NewLauncher(path string) (*Launcher, error) {
	dir, err := os.MkdirTemp("", "gobtl-experiment-")
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	return &Launcher{gobtl: path, dir: dir}, nil
}

// Close removes the stack files.
func (l *Launcher) Close() error { return os.RemoveAll(l.dir) }

// Job runs np ranks of `gobtl ARGS` over the stack given as HCL text and
// returns what they printed on standard output (only rank 0 prints in
// the experiments' programs). A failed job's error starts with how it
// ended and what the ranks and the launcher said on standard error, then
// gives the stack and the command.
func (l *Launcher) Job(ctx context.Context, np int, stack string, args ...string) ([]byte, error) {
	file := filepath.Join(l.dir, fmt.Sprintf("stack%d.hcl", l.seq.Add(1)))
	if err := os.WriteFile(file, []byte(stack), 0o644); err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	c := exec.CommandContext(ctx, l.gobtl, append([]string{"run", "-np", fmt.Sprint(np), "-c", file, "--", l.gobtl}, args...)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%w: %s\nstack:\n%s\ncommand: %s", err, strings.TrimSpace(errb.String()), stack, strings.Join(c.Args, " "))
	}
	return out.Bytes(), nil
}

// Bench runs `gobtl bench ARGS --json` on np ranks and returns its
// report.
func (l *Launcher) Bench(ctx context.Context, np int, stack string, args ...string) (Report, error) {
	out, err := l.Job(ctx, np, stack, append(append([]string{"bench"}, args...), "--json")...)
	if err != nil {
		return Report{}, err
	}
	lines := JSONLines(out)
	if len(lines) == 0 {
		return Report{}, fmt.Errorf("gobtl bench %s: no JSON report in %q", strings.Join(args, " "), out)
	}
	return ParseReport(lines[0])
}

// Rank runs the rank program of the experiment called name (its
// Experiment.Rank) on np ranks with spec, encoded as JSON, and returns
// the JSON lines rank 0 printed.
func (l *Launcher) Rank(ctx context.Context, np int, stack, name string, spec any) ([][]byte, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("experiment: %s spec: %w", name, err)
	}
	out, err := l.Job(ctx, np, stack, "experiment", "rank", name, "--spec", string(js))
	if err != nil {
		return nil, err
	}
	lines := JSONLines(out)
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s: no JSON in the output of its ranks:\n%s", name, out)
	}
	return lines, nil
}

// JSONLines returns the lines of out that hold a JSON object.
func JSONLines(out []byte) [][]byte {
	var lines [][]byte
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "{") {
			lines = append(lines, []byte(l))
		}
	}
	return lines
}

// Report is a `gobtl bench --json` report, kept whole (Raw) for the
// fields only some benchmarks print.
type Report struct {
	Bench string           `json:"bench"`
	Rows  []map[string]any `json:"rows"`
	Raw   json.RawMessage  `json:"-"`
}

// ParseReport decodes a bench report.
func ParseReport(raw []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return Report{}, fmt.Errorf("a bench report: %w in %q", err, raw)
	}
	r.Raw = raw
	return r, nil
}

// Value is a row's field: the row of the given message size.
func (r Report) Value(size int, field string) (float64, bool) {
	for _, row := range r.Rows {
		if s, ok := row["size"].(float64); ok && int(s) == size {
			v, ok := row[field].(float64)
			return v, ok
		}
	}
	return 0, false
}

// SimWatch runs `gobtl sim -np N -c STACK -- ARGS --json` in a process
// of its own and returns what it printed and how the process ended: its
// resource use (ProcessState.SysUsage) is the simulator's alone, which
// an in-process run cannot tell apart from the experiment's. over, if
// set, is asked about the process twice a second and kills it when it
// says so (a job outgrowing the machine's memory).
func (l *Launcher) SimWatch(ctx context.Context, np int, stack string, over func(pid int) bool, args ...string) ([]byte, *os.ProcessState, error) {
	file := filepath.Join(l.dir, fmt.Sprintf("stack%d.hcl", l.seq.Add(1)))
	if err := os.WriteFile(file, []byte(stack), 0o644); err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	c := exec.CommandContext(ctx, l.gobtl, append([]string{"sim", "-np", fmt.Sprint(np), "-c", file, "--"}, append(args, "--json")...)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	done := make(chan struct{})
	var killed atomic.Bool
	if over != nil {
		go func() {
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					if over(c.Process.Pid) {
						killed.Store(true)
						c.Process.Kill()
						return
					}
				}
			}
		}()
	}
	err := c.Wait()
	close(done)
	if killed.Load() {
		return out.Bytes(), c.ProcessState, fmt.Errorf("experiment: gobtl sim -np %d killed: over its limit", np)
	}
	if err != nil {
		return out.Bytes(), c.ProcessState, fmt.Errorf("%w: %s\ncommand: %s", err, strings.TrimSpace(errb.String()), strings.Join(c.Args, " "))
	}
	return out.Bytes(), c.ProcessState, nil
}
