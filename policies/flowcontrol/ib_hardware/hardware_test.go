package ibhardware

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestSetupCountsNoCreditsAndRetriesForever(t *testing.T) {
	p := New(core.MustParams(Params))
	p.PrePost = 10
	s, err := p.Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 8, Senders: 7, BufferSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	want := core.FlowSetup{Scheme: core.FlowNone, Quota: 10, MaxQuota: 10, RNRRetry: 7}
	if s != want {
		t.Fatalf("setup %+v, want %+v", s, want)
	}
	if d := p.Observe([]core.FlowEvent{{Kind: core.FlowBacklogged, Peer: 1}}, nil); len(d) != 0 {
		t.Fatalf("the hardware scheme decided %+v", d)
	}
}

func TestSetupRefusesWhatCannotWork(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Policy
		info core.FlowInfo
	}{
		{"an EXTOLL mailbox", Policy{RNRRetry: 7}, core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: 3, Senders: 3}},
		{"no RNR retry at all", Policy{RNRRetry: 0}, core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 4, Senders: 3}},
		{"negative pre-post", Policy{PrePost: -1, RNRRetry: 7}, core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 4, Senders: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.p.Setup(c.info); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
