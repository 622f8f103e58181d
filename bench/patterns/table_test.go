package patterns

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gobtl/gobtl/bench"
)

// The table is the header, the row of totals, the rank-to-rank message
// matrix (a dot for none) and the counters of all ranks: a counter's sum
// and largest value, per-peer counters folded into one line, a gauge's
// largest maximum, and nothing for a name that stayed zero everywhere.
func TestThePatternTableShowsTotalsTheMatrixAndTheFoldedCounters(t *testing.T) {
	f := func(name string, v float64) bench.Field { return bench.Field{Name: name, Value: v} }
	rep := &bench.Report{Bench: "lu", Ranks: 2, Config: map[string]any{"stack": "t"},
		Rows: []bench.Row{{Fields: []bench.Field{f("time_us", 1234.4), f("msgs", 10), f("bytes", 4096),
			f("conns", 2), f("msgs_per_conn", 5), f("max_conn_msgs", 6)}}},
		RankMsgs: [][]int64{{0, 6}, {4, 0}},
		RankCounters: []map[string]any{
			{"pml.eager_sends": json.Number("3"), "sm.sent.peer1": json.Number("2"), "pml.idle": json.Number("0"),
				"sm.queue": map[string]any{"max": json.Number("7")}},
			{"pml.eager_sends": json.Number("5"), "sm.sent.peer0": json.Number("9"), "pml.idle": json.Number("0"),
				"sm.queue": map[string]any{"max": json.Number("4")}},
		}}
	var out bytes.Buffer
	if err := writePatternTable(&out, rep, &Pattern{Doc: "NPB LU", ClassAIters: 250}); err != nil {
		t.Fatal(err)
	}
	want := "# gobtl lu: NPB LU (seed 000 §6.3; class A runs 250 iterations)\n" +
		"# 2 ranks, stack t\n" +
		"      Time (us)       Messages          Bytes    Connections      Msgs/conn  Max msgs/conn\n" +
		"           1234             10           4096              2            5.0              6\n" +
		"\n# application messages, rank (row) to rank (column)\n" +
		"     #       0       1\n" +
		"     0       .       6\n" +
		"     1       4       .\n" +
		"\n# counters of all ranks: counters summed (and the largest per rank and peer), gauges' largest maximum\n" +
		"pml.eager_sends                                                 8              5\n" +
		"sm.queue                                                      max              7\n" +
		"sm.sent.peer*                                                  11              9\n"
	if out.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}
