package ibstatic

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestSetupIsTheStaticSchemeOfTheParameters(t *testing.T) {
	p := New(core.MustParams(Params))
	p.PrePost = 100
	s, err := p.Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 8, Senders: 7, BufferSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	// Seed 000: a threshold of 5, rendezvous while out of credits, and
	// infinite RNR retry for the optimistic credit messages.
	want := core.FlowSetup{Scheme: core.FlowCredits, Quota: 100, MaxQuota: 100, CreditThreshold: 5, RndvOnNoCredit: true, RNRRetry: 7}
	if s != want {
		t.Fatalf("setup %+v, want %+v", s, want)
	}
	if d := p.Observe([]core.FlowEvent{{Kind: core.FlowBacklogged, Peer: 1, Quota: 100}}, nil); len(d) != 0 {
		t.Fatalf("the static scheme decided %+v", d)
	}
}

func TestSetupRefusesAZeroThresholdAndOtherTransports(t *testing.T) {
	if _, err := (&Policy{PrePost: 1, Threshold: 0}).Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 2, Senders: 1}); err == nil {
		t.Fatal("threshold 0 accepted")
	}
	if _, err := (&Policy{PrePost: 1, Threshold: 5}).Setup(core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: 1, Senders: 1}); err == nil {
		t.Fatal("extoll accepted")
	}
}
