package main

import (
	"bytes"
	"strings"
	"testing"
)

// A latency metric's line is followed by the spread of each runner's
// calls where its rows carry one — gobtl's min, median, p99 and max — and
// by nothing for a runner whose rows do not (osu.c's).
func TestTheTablePrintsTheSpreadOfTheCallsBesideTheMedians(t *testing.T) {
	m := metric{"allreduce", "lat_us", 8, true, 0.7, "allreduce 8 B (us)"}
	g := &group{name: "coll", subject: runner{name: "gobtl"}, refs: []runner{{name: "ompi"}}, metrics: []metric{m}}
	k := func(r, f string) key { return key{"coll", r, "allreduce", 8, f} }
	vals := values{
		k("gobtl", "lat_us"): {3, 5, 4}, k("ompi", "lat_us"): {4, 4, 4},
		k("gobtl", "lat_us_min"): {2, 2, 2}, k("gobtl", "lat_us_median"): {3, 3, 3},
		k("gobtl", "lat_us_p99"): {9, 11, 10}, k("gobtl", "lat_us_max"): {300, 900, 500},
	}
	var out bytes.Buffer
	printTable(&out, []*group{g}, vals)
	if !strings.Contains(out.String(), "gobtl per call: min 2.000, median 3.000, p99 10.000, max 500\n") || strings.Contains(out.String(), "ompi per call") {
		t.Fatalf("table:\n%s", out.String())
	}
}
