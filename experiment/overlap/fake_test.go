package overlap

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/experiment/internal/standin"
)

// fakeEnv makes the test binary a stand-in for gobtl: started with it
// set, it answers `gobtl run ... -- gobtl bench ...` at once with made-up
// numbers (fakeGobtl), so that the tables can be checked without
// starting a job.
const fakeEnv = "OVERLAP_TEST_FAKE_GOBTL"

func TestMain(m *testing.M) { standin.Main(m, fakeEnv, fakeGobtl) }

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

// The ibperf table, run on the stand-ins for gobtl and Open MPI, is what
// it was: medians over three repetitions, the ratios and verdicts against
// the reference, or the values alone saying why there is none. (Rewrite
// the golden file with -update after a change that means to change it.)
func TestTheIBPerfTableReadsTheRunsAsBefore(t *testing.T) {
	var got strings.Builder
	for _, c := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"no reference", func(t *testing.T) string { return t.TempDir() }},
		{"Open MPI", fakeOMPI},
	} {
		t.Setenv("PATH", c.path(t))
		out, doc := standin.Run(t, fakeEnv, func(env *experiment.Env) { env.Reps = 3 }, func(env *experiment.Env) error {
			return experiment.Run(env, NewIBPerf(env, IBPerfOptions{Iters: 50}), nil)
		})
		fmt.Fprintf(&got, "-- %s\n", c.name)
		got.WriteString(standin.Tables(out))
		var d struct{ Records any }
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(d.Records)
		got.Write(append(js, '\n'))
	}
	standin.Golden(t, "ibperf.golden", got.String())
}
