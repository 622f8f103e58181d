package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/internal/plot"
)

func TestRunRunsTheNamedStepsInOrderAndTimesEach(t *testing.T) {
	var out, prog bytes.Buffer
	var ran []string
	env := &Env{Out: &out, Progress: &prog}
	step := func(name string, runs int) Step {
		return Step{Name: name, Runs: runs, Run: func() error {
			ran = append(ran, name)
			for range runs {
				env.Begin("%s run", name)
			}
			return nil
		}}
	}
	p := &Plan{Name: "x", Header: "header\n", Steps: []Step{step("a", 2), step("b", 1), step("c", 3)}}
	if err := Run(env, p, []string{"c", "a"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ran, ",") != "a,c" {
		t.Fatalf("ran %v, want a then c", ran)
	}
	if !strings.HasPrefix(out.String(), "header\n") || !strings.Contains(out.String(), "(a took ") || !strings.Contains(out.String(), "(c took ") || strings.Contains(out.String(), "(b took ") {
		t.Fatalf("tables:\n%s", out.String())
	}
	// Five runs announced: each line says how many are done before it.
	lines := strings.Split(strings.TrimSpace(prog.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d progress lines:\n%s", len(lines), prog.String())
	}
	for i, want := range []string{"a run [0/5 runs done", "a run [1/5 runs done", "c run [2/5 runs done", "c run [3/5 runs done", "c run [4/5 runs done"} {
		if !strings.HasPrefix(lines[i], want) || !strings.Contains(lines[i], "ETA") {
			t.Errorf("line %d: %q, want it to start %q and give an ETA", i, lines[i], want)
		}
	}
}

func TestAStepThatStartsMoreRunsThanItSaidStaysWithinItsShare(t *testing.T) {
	var prog bytes.Buffer
	env := &Env{Out: io.Discard, Progress: &prog}
	p := &Plan{Name: "x", Steps: []Step{
		{Name: "a", Runs: 1, Run: func() error { env.Begin("a"); env.Begin("a"); env.Begin("a"); return nil }},
		{Name: "b", Runs: 1, Run: func() error { env.Begin("b"); return nil }},
	}}
	if err := Run(env, p, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prog.String(), "a [0/2 runs done") || strings.Contains(prog.String(), "a [1/2") || !strings.Contains(prog.String(), "b [1/2 runs done") {
		t.Fatalf("progress:\n%s", prog.String())
	}
}

func TestRunRefusesAStepItDoesNotHaveAndNamesAFailedOne(t *testing.T) {
	boom := errors.New("boom")
	p := &Plan{Name: "x", Steps: []Step{{Name: "a", Run: func() error { return boom }}}}
	env := &Env{Out: io.Discard}
	if err := Run(env, p, []string{"nosuch"}); err == nil || !strings.Contains(err.Error(), `no experiment "nosuch" (have a)`) {
		t.Fatalf("an unknown step: %v", err)
	}
	if err := Run(env, p, nil); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "x a: ") {
		t.Fatalf("a failed step: %v", err)
	}
	single := &Plan{Name: "x", Steps: []Step{{Name: "x", Run: func() error { return boom }}}}
	if err := Run(env, single, nil); err == nil || err.Error() != "x: boom" {
		t.Fatalf("the step of a one-step plan: %v", err)
	}
}

// fakeGobtl is a gobtl whose run command prints what the test says:
// stdout and stderr and an exit status, after checking it was started as
// gobtl run -np N -c FILE -- GOBTL ARGS.
func fakeGobtl(t *testing.T, stdout, stderr string, status int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gobtl")
	script := "#!/bin/sh\n" +
		`[ "$1" = run ] && [ "$2" = -np ] && [ "$4" = -c ] && [ -f "$5" ] && [ "$6" = -- ] || { echo "bad arguments: $*" >&2; exit 99; }` + "\n" +
		"printf '%s' '" + stdout + "'\nprintf '%s' '" + stderr + "' >&2\nexit " + string(rune('0'+status)) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTheLauncherReadsReportsAndSaysWhyAJobFailed(t *testing.T) {
	ctx := context.Background()
	l, err := NewLauncher(fakeGobtl(t, "launcher chatter\n"+`{"bench":"latency","rows":[{"size":8,"lat_us":3.5}]}`+"\n", "", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep, err := l.Bench(ctx, 2, "job {}\n", "latency", "--sizes", "8")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := rep.Value(8, "lat_us"); !ok || v != 3.5 || rep.Bench != "latency" || len(rep.Raw) == 0 {
		t.Fatalf("report %+v", rep)
	}
	if _, ok := rep.Value(16, "lat_us"); ok {
		t.Fatal("a value for a size the report does not have")
	}

	bad, err := NewLauncher(fakeGobtl(t, "", "rank 1 stalled", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	_, err = bad.Rank(ctx, 4, "btl \"self\" \"self\" {}\n", "extoll", map[string]int{"iters": 3})
	if err == nil || !strings.HasPrefix(err.Error(), "exit status 1: rank 1 stalled\nstack:\nbtl \"self\"") ||
		!strings.Contains(err.Error(), `experiment rank extoll --spec {"iters":3}`) {
		t.Fatalf("a failed job: %v", err)
	}
}

func TestRankOfDecodesTheSpec(t *testing.T) {
	type spec struct{ Size int }
	var got spec
	f := RankOf(func(_ bench.Comm, s spec, _ io.Writer) error { got = s; return nil })
	if err := f(nil, []byte(`{"Size":42}`), io.Discard); err != nil || got.Size != 42 {
		t.Fatalf("got %+v, %v", got, err)
	}
	if err := f(nil, []byte(`{"Size":"x"}`), io.Discard); err == nil {
		t.Fatal("a spec of the wrong type decoded")
	}
}

func TestAFigureIsWrittenAndNamedOnlyWithADirectory(t *testing.T) {
	var out bytes.Buffer
	env := &Env{Out: &out}
	f := plot.Figure{Title: "t", LogX: true, XTicks: plot.SizeTicks{}, Lines: []plot.Line{{Name: "a", XY: plot.Curve(map[int]float64{4: 1, 64: 2, 1024: 0})}}}
	if err := env.Figure("fig", f); err != nil || out.Len() != 0 {
		t.Fatalf("without a directory: %v %q", err, out.String())
	}
	env.Plots = filepath.Join(t.TempDir(), "plots")
	if err := env.Figure("fig", f); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(env.Plots, "fig.png")
	if st, err := os.Stat(path); err != nil || st.Size() == 0 || out.String() != "plot: "+path+"\n" {
		t.Fatalf("%v %v %q", st, err, out.String())
	}
	if len(f.Lines[0].XY) != 2 {
		t.Fatalf("Curve kept %v: a log axis cannot show 0", f.Lines[0].XY)
	}
}

// Each check prints its verdict with the threshold; the run ends with a
// summary per mode, and --json gets the checks, the records and the load.
func TestChecksAreSummarisedAndWrittenAsJSON(t *testing.T) {
	var out, js bytes.Buffer
	env := &Env{Out: &out, JSON: &js}
	p := &Plan{Name: "x", Steps: []Step{{Name: "a", Run: func() error {
		if v := env.Check("T", "r1", "goes up", 2, AtLeast(1.5)); v != "reproduced (2 >= 1.5)" {
			t.Errorf("verdict %q", v)
		}
		if v := env.Check("T", "r2", "stays put", 3, Within(1, 0.5)); v != "NOT reproduced (3, want 1 ± 0.5)" {
			t.Errorf("verdict %q", v)
		}
		env.Unshown("T", "r3", "overlaps", "2 CPUs")
		env.Record("T", map[string]int{"n": 1})
		// A value not measured is NaN; the document must still encode,
		// with null for it.
		env.Check("T", "r4", "after", nan, AtLeast(1))
		env.Record("T", struct {
			A float64 `json:"a"`
			B []float64
			C time.Time `json:"c,omitempty"`
		}{A: nan, B: []float64{1, math.Inf(1)}})
		return nil
	}}}}
	if err := Run(env, p, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "policies builtin: 1 reproduced, 2 not reproduced, 1 not shown on this machine") ||
		!strings.Contains(out.String(), "T / r2: NOT reproduced") || !strings.Contains(out.String(), "load at start") {
		t.Fatalf("summary:\n%s", out.String())
	}
	var doc struct {
		Experiment string
		Load       [2]string
		Summary    Summary
		Checks     []Check
		Records    []Record
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("%v in %s", err, js.String())
	}
	if len(doc.Records) != 2 {
		t.Fatalf("records %+v", doc.Records)
	}
	if row, ok := doc.Records[1].Row.(map[string]any); !ok || row["a"] != nil || !reflect.DeepEqual(row["B"], []any{1.0, nil}) || !strings.Contains(js.String(), `"value": null`) {
		t.Fatalf("NaN and Inf not null in %s", js.String())
	}
	if doc.Experiment != "x" || doc.Summary != (Summary{1, 2, 1}) || len(doc.Checks) != 4 || len(doc.Records) != 2 || doc.Load[0] == "" ||
		doc.Checks[0].Step != "a" || doc.Checks[0].Mode != "builtin" {
		t.Fatalf("document %+v", doc)
	}
	for _, c := range []struct {
		at   [2]string
		cpus int
		busy bool
	}{{[2]string{"0.50 0.40 0.30", "4.01 1 1"}, 2, true}, {[2]string{"4.00 9 9", "1.2 1 1"}, 2, false}, {[2]string{"unknown", ""}, 2, false}} {
		if _, busy := shared(c.at, c.cpus); busy != c.busy {
			t.Errorf("shared(%q, %d) = %v", c.at, c.cpus, busy)
		}
	}
	if Median([]float64{3, 1, 2}) != 2 || Median([]float64{4, 1, 2, 3}) != 2.5 {
		t.Fatal("median")
	}
}

// With Plugins every step runs twice, the second time with the policies'
// plugins, named by PolicyLines from the plugin directory, which a failed
// plugin aborts rather than fall back from.
func TestPluginsModeRunsTheStepsAgainWithPlugins(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	env := &Env{Out: &out, Plugins: true, PluginDir: dir}
	var lines []string
	p := &Plan{Name: "x", Steps: []Step{{Name: "a", Run: func() error {
		lines = append(lines, env.PolicyLines("ib_static"))
		env.Check("T", "r", "t", 1, AtLeast(1))
		return nil
	}}}}
	if err := Run(env, p, nil); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0] != "  builtin = \"ib_static\"\n" || !strings.Contains(lines[1], "plugin     = \"ib_static\"") ||
		!strings.Contains(lines[1], dir) || !strings.Contains(lines[1], `on_failure = "abort"`) {
		t.Fatalf("policy lines %q", lines)
	}
	if !strings.Contains(out.String(), "policies builtin: 1 reproduced") || !strings.Contains(out.String(), "policies plugin: 1 reproduced") {
		t.Fatalf("summary:\n%s", out.String())
	}
	env = &Env{Out: &out, Plugins: true, PluginDir: filepath.Join(dir, "none")}
	if err := Run(env, p, nil); err == nil || !strings.Contains(err.Error(), "--plugins") {
		t.Fatalf("no plugin directory: %v", err)
	}
}
