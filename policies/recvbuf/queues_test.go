package recvbuf

import (
	"strings"
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestParseReceiveQueuesReadsOpenMPISyntax(t *testing.T) {
	qs, err := ParseReceiveQueues("P,128,256,192,128:S,2048,1024,1008,64:S,12288,1024")
	if err != nil {
		t.Fatal(err)
	}
	want := []core.QueueSpec{
		{Kind: core.QueuePerPeer, BufSize: 128, Count: 256, Low: 128},
		{Kind: core.QueueShared, BufSize: 2048, Count: 1024, Low: 1008, MaxPending: 64},
		{Kind: core.QueueShared, BufSize: 12288, Count: 1024, Low: 1024 - 64},
	}
	if len(qs) != len(want) {
		t.Fatalf("got %d queues", len(qs))
	}
	for i := range want {
		if qs[i] != want[i] {
			t.Errorf("queue %d: %+v, want %+v", i, qs[i], want[i])
		}
	}
	again, err := ParseReceiveQueues(core.RecvSetup{Queues: qs}.String())
	if err != nil {
		t.Fatal(err)
	}
	for i := range qs {
		if again[i] != qs[i] {
			t.Errorf("round trip of queue %d: %+v, want %+v", i, again[i], qs[i])
		}
	}
}

func TestParseReceiveQueuesRejectsMalformedStrings(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"", "empty"},
		{"P,128", "count"},
		{"X,128,4", "type"},
		{"P,128,abc", "integer"},
		{"P,128,0", "buffer"},
		{"P,128,8,9", "low watermark"},
		{"P,128,8,4,9", "credit window"},
		{"P,128,8,4,0", "credit window"},
		{"P,128,8,4,4,9", "reserve"},
		{"P,128,8,4,4,4,4", "at most 5"},
		{"S,128,8,9", "low watermark"},
		{"S,128,8,4,2,1", "at most 4"},
		{"P,128,8:S,-1,4", "non-negative"},
	} {
		_, err := ParseReceiveQueues(c.in)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%q: error %v, want one mentioning %q", c.in, err, c.why)
		}
	}
}

func TestGrowAnswersLimitEventsOnSharedQueuesOnly(t *testing.T) {
	qs := []core.QueueSpec{
		{Kind: core.QueuePerPeer, BufSize: 160, Count: 8, Low: 4},
		{Kind: core.QueueShared, BufSize: 1024, Count: 100, Low: 25, Max: 400},
	}
	ev := []core.RecvEvent{
		{Kind: core.RecvLimit, Queue: 1, Posted: 20},
		{Kind: core.RecvLimit, Queue: 0},
		{Kind: core.RecvExhausted, Queue: 1},
		{Kind: core.RecvLimit, Queue: 7},
	}
	got := Grow(ev, nil, qs, func(q core.QueueSpec) int { return q.Count / 2 })
	want := []core.RecvDecision{{Kind: core.RecvGrow, Queue: 1, Value: 50}, {Kind: core.RecvSetLimit, Queue: 1, Value: 25}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("decisions %+v, want %+v", got, want)
	}
}
