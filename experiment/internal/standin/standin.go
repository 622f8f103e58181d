// Package standin runs an experiment's tables in its tests without
// starting a job: the test binary stands in for gobtl (Main), answering
// each `gobtl run ... -- gobtl ARGS` at once with made-up numbers of the
// package's own, and the tables it then prints, less what depends on the
// machine (Tables), are compared with a golden file (Golden; rewritten
// with -update after a change that means to change them).
package standin

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/experiment"
)

var update = flag.Bool("update", false, "rewrite the golden files of the tests")

// Main is a TestMain: with env set to "1" the binary is the stand-in and
// exits with fake's status for its arguments; otherwise it runs the tests.
func Main(m *testing.M, env string, fake func(args []string) int) {
	if os.Getenv(env) == "1" {
		os.Exit(fake(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// Run runs an experiment whose jobs start this test binary as gobtl with
// env set, and returns what it printed and its JSON document. opts sets
// the Env's other fields (Reps, Quick) before run builds the experiment.
func Run(t *testing.T, env string, opts func(*experiment.Env), run func(*experiment.Env) error) (out, doc []byte) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(env, "1")
	l, err := experiment.NewLauncher(self)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var o, d bytes.Buffer
	e := &experiment.Env{Ctx: context.Background(), Out: &o, Jobs: l, JSON: &d}
	opts(e)
	if err := run(e); err != nil {
		t.Fatalf("%v\n%s", err, o.String())
	}
	return o.Bytes(), d.Bytes()
}

// machineLines start (or hold) what depends on the machine and the run:
// its CPUs and load, and the wall times.
var machineLines = []string{"Machine:", "== Summary", "The machine was shared", "(latency, bandwidth", "messages, bytes", "machine has"}

// Tables is out, line by line, without the lines that depend on the
// machine or the run.
func Tables(out []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, " took ") || hasAnyPrefix(line, machineLines) {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Golden compares got with testdata/name, after writing it there with
// -update.
func Golden(t *testing.T, name, got string) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("the tables changed:\n%s\nwant (%s):\n%s", got, golden, want)
	}
}
