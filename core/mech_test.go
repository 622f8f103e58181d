package core

import (
	"strings"
	"testing"
)

func TestMechTableLookupAndDepth(t *testing.T) {
	tab := MechTable{{Max: 4 << 10, RDMADepth: NoRDMA}, {Max: 1 << 20, RDMADepth: 1}, {RDMADepth: 0}}
	if err := tab.Validate(0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size     int64
		inflight int
		rdma     bool
	}{
		{1, 0, false}, {4 << 10, 0, false}, {4<<10 + 1, 0, true}, {4<<10 + 1, 1, true}, {4<<10 + 1, 2, false},
		{1 << 20, 1, true}, {1<<20 + 1, 0, true}, {1<<20 + 1, 1, false}, {1 << 40, 0, true},
	} {
		if got := tab.Lookup(tc.size).UseRDMA(tc.inflight); got != tc.rdma {
			t.Errorf("%d bytes, %d in flight: RDMA %v, want %v", tc.size, tc.inflight, got, tc.rdma)
		}
	}
	if MechTable(nil).Lookup(1) != nil {
		t.Error("an empty table has a rule")
	}
}

func TestMechTableValidate(t *testing.T) {
	for _, tc := range []struct {
		tab  MechTable
		want string
	}{
		{nil, "no rules"},
		{MechTable{{Max: 8}}, "rule 1: the last rule must cover every larger size"},
		{MechTable{{}, {}}, "rule 1: only the last rule may have no max"},
		{MechTable{{Max: 8}, {Max: 8}, {}}, "rule 2: max 8B does not exceed the previous rule's 8B"},
		{MechTable{{RDMADepth: -2}}, "rule 1: single-copy depth -2"},
		{MechTable{{Frag: 64 << 10}}, "rule 1: fragment 64KiB exceeds max_send_size 32KiB"},
		{MechTable{{Depth: -1}}, "rule 1: depth -1 is negative"},
	} {
		err := tc.tab.Validate(32 << 10)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.tab, err, tc.want)
		}
	}
}
