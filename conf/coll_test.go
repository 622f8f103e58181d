package conf_test

import (
	"slices"
	"testing"

	"github.com/gobtl/gobtl/conf"
)

func TestTheCollBlockTunesAlgorithmsWithPositionedDiagnostics(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"a misspelt algorithm suggests the near one",
			"coll {\n  allreduce = \"rign\"\n}\n",
			[]string{`a.hcl:2:15: Invalid value for "allreduce"; "rign" is not one of "auto", "recursive_doubling", "rabenseifner", "ring", "reduce_bcast", "linear", "direct" and "shm". Did you mean "ring"?`}},
		{"a misspelt collective suggests the near one",
			"coll {\n  allreduc = \"ring\"\n}\n",
			[]string{`a.hcl:2:3: Unsupported argument; An argument named "allreduc" is not expected here. Did you mean "allreduce"?`}},
		{"an algorithm of another collective is refused",
			"coll {\n  bcast = \"ring\"\n}\n",
			[]string{`a.hcl:2:11: Invalid value for "bcast"; "ring" is not one of "auto", "binomial", "binary", "pipeline", "scatter_allgather", "linear" and "shm".`}},
		{"a second coll block is a duplicate",
			"coll {}\ncoll {}\n",
			[]string{`a.hcl:2:1: Duplicate coll block; A configuration has one coll block; the first is at a.hcl:1:1.`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := conf.LoadSources(conf.Options{}, file("a.hcl", tc.text))
			if got := render(diags); !slices.Equal(got, tc.want) {
				t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestTheCollBlockDefaultsToAutoAndKeepsWhatItSets(t *testing.T) {
	c, diags := conf.LoadSources(conf.Options{}, file("a.hcl", "coll {\n  allreduce = \"ring\"\n  segment = \"16KiB\"\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := c.Coll.String("allreduce"); got != "ring" {
		t.Errorf("allreduce = %q", got)
	}
	if got := c.Coll.String("bcast"); got != "auto" {
		t.Errorf("bcast = %q, want the default auto", got)
	}
	if got := c.Coll.Size("segment"); got != 16<<10 {
		t.Errorf("segment = %d", got)
	}
	empty, _ := conf.LoadSources(conf.Options{}, file("b.hcl", ""))
	if empty.Coll.Has("segment") || empty.Coll.String("alltoall") != "auto" {
		t.Errorf("a stack without a coll block: segment set %v, alltoall %q", empty.Coll.Has("segment"), empty.Coll.String("alltoall"))
	}
}
