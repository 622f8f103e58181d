package core_test

import (
	"slices"
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestANodeMapNumbersNodesInOrderOfFirstAppearance(t *testing.T) {
	m := core.NewNodeMap([]string{"b", "b", "a", "c", "a"})
	if want := (core.NodeMap{0, 0, 1, 2, 1}); !slices.Equal(m, want) {
		t.Fatalf("NewNodeMap = %v, want %v", m, want)
	}
	if m.Nodes() != 3 {
		t.Errorf("Nodes = %d, want 3", m.Nodes())
	}
	if err := m.Check(5); err != nil {
		t.Error(err)
	}
	if got := core.LocalRanks(m, 5, 4); !slices.Equal(got, []int{2, 4}) {
		t.Errorf("LocalRanks of rank 4 = %v, want [2 4]", got)
	}
	if m.Node(5) != -1 || m.Node(-1) != -1 {
		t.Error("a rank outside the job is on a node")
	}
	if !core.SpansNodes(m) || core.SpansNodes(core.OneNode(4)) || core.SpansNodes(nil) {
		t.Error("SpansNodes is wrong")
	}
}

func TestNodeMapCheckRejectsTablesRanksWouldDisagreeOn(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    core.NodeMap
		size int
	}{
		{"too few ranks", core.NodeMap{0, 0}, 3},
		{"a gap in the numbering", core.NodeMap{0, 2, 2}, 3},
		{"a negative node", core.NodeMap{0, -1}, 2},
	} {
		if err := tc.m.Check(tc.size); err == nil {
			t.Errorf("%s: %v passed the check", tc.name, tc.m)
		}
	}
}
