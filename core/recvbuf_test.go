package core

import (
	"strings"
	"testing"
)

func TestCheckRefusesLayoutsAMechanismCannotRun(t *testing.T) {
	ok := QueueSpec{Kind: QueueShared, BufSize: 4096, Count: 4, Low: 1}
	info := RecvInfo{Peers: 3, EagerLimit: 1024}
	for _, c := range []struct {
		name string
		qs   []QueueSpec
		why  string
	}{
		{"no queue", nil, "none"},
		{"unsorted", []QueueSpec{ok, {Kind: QueueShared, BufSize: 128, Count: 1}}, "sorted"},
		{"duplicate size", []QueueSpec{ok, ok}, "same size"},
		{"too small for a header", []QueueSpec{{Kind: QueuePerPeer, BufSize: 16, Count: 1, Low: 1}, ok}, "header"},
		{"no credit window", []QueueSpec{{Kind: QueuePerPeer, BufSize: 128, Count: 4}, ok}, "credit window"},
		{"max below count", []QueueSpec{{Kind: QueueShared, BufSize: 4096, Count: 4, Max: 2}}, "grow"},
		{"eager does not fit", []QueueSpec{{Kind: QueueShared, BufSize: 512, Count: 4}}, "eager"},
	} {
		err := RecvSetup{Queues: c.qs}.Check(info)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.why)
		}
	}
	if err := (RecvSetup{Queues: []QueueSpec{ok}}).Check(info); err != nil {
		t.Errorf("a good layout: %v", err)
	}
}
