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

// The ofi group runs only the Open MPI paths that run here: one that
// fails its probe is left out with its last words as the reason, and the
// runners beside the subject are printed under each metric without
// being a reference.
func TestAReferenceThatCannotRunIsLeftOutSayingWhyAndOthersStandBeside(t *testing.T) {
	sh := func(name, script string) runner {
		return runner{name: name, cmd: func(string, []int) []string { return []string{"sh", "-c", script} }}
	}
	m := metric{"latency", "lat_us", 8, true, 1.0, "latency 8 B (us)"}
	g := &group{name: "ofi", subject: runner{name: "gobtl ofi/tcp"}, metrics: []metric{m},
		refs: []runner{sh("btl/ofi tcp", "echo '[vm:1] warming up'; printf -- '-----\\nAt least one pair of MPI processes are unable to reach each other for\\nMPI communications.  This means that\\n-----\\n[vm:1] 1 more process has sent help message' >&2; exit 3"), sh("mtl/ofi tcp", "true")},
		also: []runner{{name: "gobtl ib/softrc"}}}
	g.probeRefs()
	if len(g.refs) != 1 || g.refs[0].name != "mtl/ofi tcp" || len(g.notes) != 1 ||
		!strings.Contains(g.notes[0], "btl/ofi tcp cannot run here") || !strings.Contains(g.notes[0], "exit status 3: At least one pair of MPI processes are unable to reach each other for MPI communications.)") {
		t.Fatalf("refs %v, notes %q", g.refs, g.notes)
	}
	k := func(r string) key { return key{"ofi", r, "latency", 8, "lat_us"} }
	vals := values{k("gobtl ofi/tcp"): {10}, k("mtl/ofi tcp"): {20}, k("gobtl ib/softrc"): {40}, k("btl/ofi tcp"): {1}}
	var out bytes.Buffer
	printTable(&out, []*group{g}, vals)
	if !strings.Contains(out.String(), "20.000 mtl/ofi tcp               0.500") ||
		!strings.Contains(out.String(), "beside: gobtl ib/softrc 40.000 (gobtl / it 0.250)") {
		t.Fatalf("table:\n%s", out.String())
	}
}
