package overlap

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	_ "github.com/gobtl/gobtl" // the components the stacks name
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/experiment"
)

// Every stack the experiments run is one `gobtl config check` accepts.
func TestTheStacksLoad(t *testing.T) {
	for i, s := range []string{ibStack(nil, "rdma_read", "", false), ibStack((&experiment.Env{}).PolicyLines, "rdma_read_async", "900MB/s", true), ibStack(nil, "rdma_write", "1GB/s", false)} {
		if _, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: fmt.Sprintf("stack%d.hcl", i), Bytes: []byte(s)}); diags.HasErrors() {
			t.Errorf("stack %d:\n%s\n%v", i, s, diags)
		}
	}
}

// The table has a row per W, a column per protocol, the W the bench
// measured as the row's label, and a dash where a report lacks a value.
func TestTheOverlapTableHasAColumnPerProtocol(t *testing.T) {
	report := func(raw string) experiment.Report {
		r, err := experiment.ParseReport([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	o := Options{Sizes: []int{1 << 20}, Compute: []string{"0"}, Protocols: []string{"rdma_write", "rdma_read"}, Rate: "900MB/s"}
	res := map[string]map[string][]experiment.Report{
		"rdma_write": {"0": {report(`{"rows":[{"size":1048576,"compute_us":1234,"overlap_send":0.25,"overlap_recv":0.5}]}`)}},
		"rdma_read":  {"0": {report(`{"rows":[{"size":1048576,"compute_us":1234,"overlap_send":0.99}]}`)}},
	}
	var b bytes.Buffer
	printOverlap(&experiment.Env{Out: &b}, o, res)
	out := b.String()
	for _, want := range []string{"link rate 900MB/s", "sender side, 1MiB", "receiver side, 1MiB", "1234us", "25.0%", "99.0%", "50.0%"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if !strings.Contains(out, "-\n") {
		t.Errorf("a missing value is not a dash:\n%s", out)
	}
}

// A row's value is the median over the repetitions that measured it; a
// repetition whose report lacks the row or the field is left out, and
// none at all is no value.
func TestTheMedianIsOverTheRepetitionsThatMeasuredTheValue(t *testing.T) {
	var reps []experiment.Report
	for _, raw := range []string{
		`{"rows":[{"size":1024,"overlap_recv":0.9}]}`,
		`{"rows":[{"size":1024,"overlap_recv":0.1},{"size":2048,"overlap_recv":0.7}]}`,
		`{"rows":[{"size":1024,"overlap_send":0.3}]}`,
		`{"rows":[{"size":1024,"overlap_recv":0.5}]}`,
	} {
		r, err := experiment.ParseReport([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	if v, ok := median(reps, 1024, "overlap_recv"); !ok || v != 0.5 {
		t.Fatalf("median of 0.9, 0.1, 0.5 (one repetition without it): %v %v", v, ok)
	}
	if v, ok := median(reps, 2048, "overlap_recv"); !ok || v != 0.7 {
		t.Fatalf("one repetition measured 2 KiB: %v %v", v, ok)
	}
	if _, ok := median(reps, 4096, "overlap_recv"); ok {
		t.Fatal("a size no repetition measured has a value")
	}
}
