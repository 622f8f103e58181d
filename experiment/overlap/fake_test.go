package overlap

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/experiment"
)

// fakeEnv makes the test binary a stand-in for gobtl: started with it
// set, it answers `gobtl run ... -- gobtl bench ...` at once with made-up
// numbers (fakeGobtl), so that the tables can be checked without
// starting a job.
const fakeEnv = "OVERLAP_TEST_FAKE_GOBTL"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		os.Exit(fakeGobtl(os.Args[1:]))
	}
	os.Exit(m.Run())
}

var stackSeq = regexp.MustCompile(`stack(\d+)\.hcl$`)

// fakeGobtl answers one `gobtl run -np N -c STACK -- gobtl bench B ...`
// with a latency or a bandwidth that depends on the job's sequence
// number, so that repetitions differ and a median means something.
func fakeGobtl(args []string) int {
	seq, _ := strconv.Atoi(stackSeq.FindStringSubmatch(args[4])[1])
	switch bench := args[8]; bench {
	case "latency":
		fmt.Printf(`{"bench":"latency","rows":[{"size":8,"lat_us":%g}]}`+"\n", 10+float64(seq%5))
	case "bw":
		fmt.Printf(`{"bench":"bw","rows":[{"size":1048576,"mbps":%g}]}`+"\n", 900+10*float64(seq%7))
	default:
		fmt.Fprintf(os.Stderr, "no bench %q\n", bench)
		return 1
	}
	return 0
}

// fakeOMPI is a directory with stand-ins for Open MPI's mpicc, which
// makes an empty program, and mpirun, which reports a latency of 12 µs or
// a bandwidth of 950 MB/s.
func fakeOMPI(t *testing.T) string {
	dir := t.TempDir()
	for name, script := range map[string]string{
		ompiCC:  "#!/bin/sh\n: > \"$3\"\n",
		ompiRun: "#!/bin/sh\ncase \"$*\" in\n*latency*) echo '{\"bench\":\"latency\",\"rows\":[{\"size\":8,\"lat_us\":12}]}';;\n*) echo '{\"bench\":\"bw\",\"rows\":[{\"size\":1048576,\"mbps\":950}]}';;\nesac\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var update = flag.Bool("update", false, "rewrite the golden files of the tests")

// The ibperf table, run on the stand-ins for gobtl and Open MPI, is what
// it was: medians over three repetitions, the ratios and verdicts against
// the reference, or the values alone saying why there is none. (Rewrite
// the golden file with -update after a change that means to change it.)
func TestTheIBPerfTableReadsTheRunsAsBefore(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeEnv, "1")
	var got strings.Builder
	for _, c := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"no reference", func(t *testing.T) string { return t.TempDir() }},
		{"Open MPI", fakeOMPI},
	} {
		t.Setenv("PATH", c.path(t))
		l, err := experiment.NewLauncher(self)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var out, doc bytes.Buffer
		env := &experiment.Env{Ctx: context.Background(), Out: &out, Reps: 3, Jobs: l, JSON: &doc}
		if err := experiment.Run(env, NewIBPerf(env, IBPerfOptions{Iters: 50}), nil); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out.String())
		}
		fmt.Fprintf(&got, "-- %s\n", c.name)
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, "Machine:") || strings.Contains(line, " took ") || strings.HasPrefix(line, "== Summary") ||
				strings.HasPrefix(line, "The machine was shared") || strings.HasPrefix(line, "(latency, bandwidth") || strings.HasPrefix(line, "messages, bytes") {
				continue // the machine's load and the wall times
			}
			got.WriteString(line + "\n")
		}
		var d struct{ Records any }
		if err := json.Unmarshal(doc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(d.Records)
		got.Write(append(js, '\n'))
	}
	golden := filepath.Join("testdata", "ibperf.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("the tables changed:\n%s\nwant (%s):\n%s", got.String(), golden, want)
	}
}
