package main

import (
	"math"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/conformance"
	"github.com/gobtl/gobtl/plugins/conformance/conformancetest"
)

func newTestSkeleton(t *testing.T, set map[string]string) *skeleton {
	t.Helper()
	p := core.MustParams(params)
	for k, v := range set {
		if err := p.SetText(k, v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := newSkeleton(p)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*skeleton)
}

// stripes is one message to peer 0 striped half and half over two rails,
// the first four times as fast as the second.
func stripes(msg uint64) []core.SchedEvent {
	return []core.SchedEvent{
		{Kind: core.SchedStripeDone, Peer: 0, Sub: 0, Msg: msg, Bytes: 1 << 20, Time: time.Millisecond},
		{Kind: core.SchedStripeDone, Peer: 0, Sub: 1, Msg: msg, Bytes: 1 << 20, Time: 4 * time.Millisecond, Last: true},
	}
}

func TestWeightsFollowTheFasterRail(t *testing.T) {
	s := newTestSkeleton(t, map[string]string{"alpha": "0.5", "every": "2"})
	setup, err := s.Setup(core.SchedInfo{Peer: 0, Subchannels: []core.SubchannelInfo{{Bandwidth: 1e9}, {Bandwidth: 1e9}}})
	if err != nil {
		t.Fatal(err)
	}
	if setup.Weights[0] != 50 || setup.Weights[1] != 50 || setup.TotalWeight != totalWeight {
		t.Fatalf("rails that report the same bandwidth start at %v of %v", setup.Weights, setup.TotalWeight)
	}
	var out []core.SchedDecision
	for m := range uint64(20) {
		out = s.Observe(stripes(m), out[:0])
		if m%2 == 0 && len(out) != 0 {
			t.Fatalf("message %d: proposed %v between two proposals", m, out)
		}
	}
	if len(out) != 2 {
		t.Fatalf("the 20th message brought %v, want the peer's two weights", out)
	}
	if w0, w1 := out[0].Weight, out[1].Weight; math.Abs(w0+w1-totalWeight) > 1e-9 || w0 < 3.9*w1 {
		t.Fatalf("weights %v and %v for rails of 4:1 throughput", w0, w1)
	}
}

func TestEventsItWasNotSetUpForAreIgnored(t *testing.T) {
	s := newTestSkeleton(t, map[string]string{"every": "1"})
	if _, err := s.Setup(core.SchedInfo{Peer: 0, Subchannels: []core.SubchannelInfo{{Bandwidth: 1e9}}}); err != nil {
		t.Fatal(err)
	}
	out := s.Observe([]core.SchedEvent{
		{Kind: core.SchedStripeDone, Peer: 7, Sub: 0, Bytes: 10, Time: time.Microsecond, Last: true},    // unknown peer
		{Kind: core.SchedStripeDone, Peer: 0, Sub: 3, Bytes: 10, Time: time.Microsecond, Last: true},    // unknown rail
		{Kind: core.SchedStripeDone, Peer: 0, Sub: 0, Bytes: 10, Time: 0, Last: true},                   // no time
		{Kind: core.SchedEventKind(99), Peer: 0, Sub: 0, Bytes: 10, Time: time.Microsecond, Last: true}, // unknown kind
	}, nil)
	if len(out) != 0 {
		t.Fatalf("decisions from events the policy was not set up for: %v", out)
	}
	if _, err := s.Setup(core.SchedInfo{Peer: 1}); err == nil {
		t.Fatal("a peer without subchannels was set up")
	}
}

func TestOutOfRangeParametersAreRefused(t *testing.T) {
	for k, v := range map[string]string{"alpha": "0", "every": "0", "stripe_threshold": "0"} {
		if err := core.MustParams(params).SetText(k, v); err == nil {
			t.Errorf("%s = %s was accepted", k, v)
		}
	}
}

// TestSkeletonConforms builds the plugin and runs gobtl's conformance
// suite on it, as `gobtl plugins verify` does.
func TestSkeletonConforms(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "skeleton")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	conformancetest.Run(t, bin, conformance.Options{Events: 5000})
}
