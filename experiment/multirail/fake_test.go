package multirail

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/experiment/internal/standin"
)

// fakeEnv makes the test binary a stand-in for gobtl: started with it
// set, it answers `gobtl run ... -- gobtl ARGS` at once with made-up
// numbers (fakeGobtl), so that the experiments' tables can be checked
// without starting a job.
const fakeEnv = "MULTIRAIL_TEST_FAKE_GOBTL"

func TestMain(m *testing.M) { standin.Main(m, fakeEnv, fakeGobtl) }

var stackSeq = regexp.MustCompile(`stack(\d+)\.hcl$`)

// fakeGobtl answers one job: args are "run -np N -c STACK -- gobtl ARGS".
// A bench's values depend on the stack (a hash of its text), the size
// and the job's sequence number, so that stacks and repetitions differ;
// a stream reports weights that move from even to 4:1.
func fakeGobtl(args []string) int {
	stack, err := os.ReadFile(args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	seq, _ := strconv.Atoi(stackSeq.FindStringSubmatch(args[4])[1])
	h := fnv.New32a()
	h.Write(stack)
	base := 50 + float64(h.Sum32()%100) + float64(seq%3)
	cmd := args[7:] // after "--" and the gobtl to run
	if cmd[0] == "experiment" {
		fmt.Println(`{"size":1048576,"messages":300,"mbps":912.5,"samples":[[{"unix":1,"mbps":900,"weights":[50,50]}],` +
			`[{"unix":1,"weights":[50,50]},{"unix":2,"weights":[70,30]},{"unix":3,"weights":[79.5,20.5]}]],"counters":[{},{}]}`)
		return 0
	}
	bench := cmd[1] // cmd[0] is "bench"
	var rows []string
	for _, s := range strings.Split(cmd[3], ",") {
		n, _ := strconv.Atoi(s)
		v := base * float64(n+1000) / 1000
		if bench == "latency" {
			rows = append(rows, fmt.Sprintf(`{"size":%d,"lat_us":%g}`, n, v/100))
		} else {
			rows = append(rows, fmt.Sprintf(`{"size":%d,"mbps":%g}`, n, v))
		}
	}
	fmt.Printf(`{"bench":%q,"rows":[%s]}`+"\n", bench, strings.Join(rows, ","))
	return 0
}

// The 4x1x tables, run on the stand-in, are what they were: the columns,
// the medians over three repetitions, the verdicts and the records.
// (Rewrite the golden file with -update after a change that means to
// change them.)
func TestThe4x1xTablesReadTheRunsAsBefore(t *testing.T) {
	out, doc := standin.Run(t, fakeEnv, func(env *experiment.Env) { env.Reps = 3 }, func(env *experiment.Env) error {
		return experiment.Run(env, New(env, Options{Tag: "t"}), []string{"4x1x"})
	})
	var d struct{ Checks, Records any }
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(d, "", " ")
	standin.Golden(t, "4x1x.golden", standin.Tables(out)+string(js))
}
