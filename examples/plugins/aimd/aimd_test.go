package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/conformance"
	"github.com/gobtl/gobtl/plugins/conformance/conformancetest"
)

func newTestAIMD(t *testing.T, info core.FlowInfo) (*aimd, core.FlowSetup) {
	t.Helper()
	p := core.MustParams(params)
	fc, err := newAIMD(p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fc.Setup(info)
	if err != nil {
		t.Fatal(err)
	}
	return fc.(*aimd), s
}

func TestBackloggedPeersGrowAndIdlePeersShrink(t *testing.T) {
	a, s := newTestAIMD(t, core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 3, Senders: 2, BufferSize: 2048})
	if s.Quota != 2 || s.MaxQuota != 64 || s.CreditThreshold != 1 {
		t.Fatalf("Setup = %+v", s)
	}
	out := a.Observe([]core.FlowEvent{{Kind: core.FlowBacklogged, Peer: 1}, {Kind: core.FlowBacklogged, Peer: 1}}, nil)
	if len(out) != 2 || out[1] != (core.FlowDecision{Kind: core.FlowSetQuota, Peer: 1, Value: 6}) {
		t.Fatalf("after two backlogged frames: %+v, want peer 1 at 2+2+2", out)
	}
	out = a.Observe([]core.FlowEvent{{Kind: core.FlowIdle, Peer: 1, Value: int64(time.Second)}}, out[:0])
	if len(out) != 1 || out[0].Value != 3 {
		t.Fatalf("after an idle second: %+v, want peer 1 halved to 3", out)
	}
	out = a.Observe([]core.FlowEvent{{Kind: core.FlowIdle, Peer: 0, Value: int64(time.Second)}}, out[:0])
	if len(out) != 0 {
		t.Fatalf("peer 0 at its floor shrank: %+v", out)
	}
}

func TestABoundedPoolIsNeverOverPromised(t *testing.T) {
	a, s := newTestAIMD(t, core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: 4, Senders: 4, BufferSize: 64, Buffers: 20})
	if s.MaxQuota != 10 { // 20 - 4 credit slots - 3 peers × 2
		t.Fatalf("MaxQuota = %d", s.MaxQuota)
	}
	for i := 0; i < 100; i++ {
		a.Observe([]core.FlowEvent{{Kind: core.FlowBacklogged, Peer: int32(i % 4)}}, nil)
		if a.total > 16 {
			t.Fatalf("after %d backlogged frames %d buffers are promised, 16 exist for data", i+1, a.total)
		}
	}
}

// TestAIMDConforms builds the plugin and runs gobtl's conformance suite on
// it, exactly as `gobtl plugins verify` does.
func TestAIMDConforms(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "aimd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	conformancetest.Run(t, bin, conformance.Options{Events: 5000})
}
