package flowcontrol

import (
	"encoding/json"
	"fmt"
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
const fakeEnv = "FLOWCONTROL_TEST_FAKE_GOBTL"

func TestMain(m *testing.M) { standin.Main(m, fakeEnv, fakeGobtl) }

var (
	stackSeq   = regexp.MustCompile(`stack(\d+)\.hcl$`)
	fcScheme   = regexp.MustCompile(`builtin = "ib_(\w+)"`)
	fcPrePost  = regexp.MustCompile(`(?:pre_post|initial) = (\d+)`)
	schemeBase = map[string]float64{"hardware": 100, "static": 90, "dynamic": 110}
)

// fakeGobtl answers one job: args are "run -np N -c STACK -- gobtl ARGS".
// Its numbers depend on the scheme and pre-post count of the stack, on
// what ARGS ask, and on the job's sequence number, so that repetitions
// differ and a median means something.
func fakeGobtl(args []string) int {
	np, _ := strconv.Atoi(args[2])
	stack, err := os.ReadFile(args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	seq, _ := strconv.Atoi(stackSeq.FindStringSubmatch(args[4])[1])
	scheme := fcScheme.FindStringSubmatch(string(stack))[1]
	pre, _ := strconv.Atoi(fcPrePost.FindStringSubmatch(string(stack))[1])
	jitter := 1 + float64(seq%3)/10
	base := schemeBase[scheme] * jitter
	cmd := args[7:] // after "--" and the gobtl to run
	switch {
	case cmd[0] == "experiment":
		var o BWOptions
		if err := json.Unmarshal([]byte(cmd[len(cmd)-1]), &o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, w := range o.Windows {
			blocking := map[bool]float64{true: 0.5, false: 1}[o.Blocking]
			row := BWRow{Window: w, MBps: base * blocking * float64(w*o.Size) / float64(w+pre),
				Sender:   map[string]int64{"ib.ib0.stalls.peer1": int64(max(0, w-pre)), "ib.ib0.rndv_no_credit.peer1": int64(seq)},
				Receiver: map[string]int64{"ib.ib0.rnr_naks_sent": int64(w * seq), "ib.ib0.posted_max.peer0": int64(pre + w/2)}}
			b, _ := json.Marshal(row)
			fmt.Println(string(b))
		}
	case cmd[1] == "latency":
		var rows []string
		for _, s := range strings.Split(cmd[3], ",") {
			n, _ := strconv.Atoi(s)
			rows = append(rows, fmt.Sprintf(`{"size":%d,"lat_us":%g}`, n, float64(n)/base+2*jitter))
		}
		fmt.Printf(`{"bench":"latency","rows":[%s]}`+"\n", strings.Join(rows, ","))
	default: // a pattern
		var ranks []string
		for r := range np {
			var m []string
			for p := range np {
				if p != r {
					m = append(m, fmt.Sprintf(`"ib.ib0.frames.peer%d":%d,"ib.ib0.credit_messages.peer%d":%d,"ib.ib0.posted_max.peer%d":{"value":1,"max":%d}`,
						p, 100+r+p+seq, p, (r+1)*len(cmd[1])*100/(pre+1), p, (p+1)*(pre+1)+int(base)/30))
				}
			}
			ranks = append(ranks, "{"+strings.Join(m, ",")+"}")
		}
		fmt.Printf(`{"bench":%q,"rows":[{"size":0,"time_us":%g}],"rank_counters":[%s]}`+"\n", cmd[1], 1000*base/float64(pre+10)*jitter, strings.Join(ranks, ","))
	}
	return 0
}

// The tables of every step, run on the stand-in, are what they were: the
// columns, the medians over three repetitions, the middle repetition's
// counters, the verdicts and the records. (Rewrite the golden file with
// -update after a change that means to change them.)
func TestEveryTableOfTheExperimentReadsTheRunsAsBefore(t *testing.T) {
	out, doc := standin.Run(t, fakeEnv, func(env *experiment.Env) { env.Quick, env.Reps = true, 3 }, func(env *experiment.Env) error {
		return experiment.Run(env, New(env, Options{Patterns: []string{"lu", "cg"}, Ranks: 2}), nil)
	})
	var d struct{ Checks, Records any }
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(d, "", " ")
	standin.Golden(t, "tables.golden", standin.Tables(out)+string(js))
}
