package plugins

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/mptest"
)

// TestTheExamplePluginBuildsOnItsOwnAndRuns builds examples/plugins/aimd
// as its own module — as a third party would — and runs it from a policy
// block that sets a parameter of the plugin's own schema.
func TestTheExamplePluginBuildsOnItsOwnAndRuns(t *testing.T) {
	dir := t.TempDir()
	if err := mptest.Build("../examples/plugins/aimd", filepath.Join(dir, "aimd"), "."); err != nil {
		t.Fatal(err)
	}
	schema, err := Schema(core.KindFlowControl, "", filepath.Join(dir, "aimd"))
	if err != nil {
		t.Fatal(err)
	}
	params := core.MustParams(schema)
	if err := params.SetText("step", "4"); err != nil {
		t.Fatal(err)
	}
	log, _ := testLogger()
	p, err := Open(context.Background(), Block{Kind: core.KindFlowControl, Plugin: "aimd", PluginDir: dir, Params: params, Pos: "stack.hcl:1"}, Options{Log: log, Deadline: testDeadline})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Plugin.Name != "aimd" || p.Plugin.Version != "0.1.0" {
		t.Fatalf("plugin = %+v", p.Plugin)
	}
	fc := p.FlowControl()
	s, err := fc.Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 5, Senders: 4, BufferSize: 2048})
	if err != nil || s.Quota != 2 {
		t.Fatalf("Setup = %+v, %v", s, err)
	}
	out := fc.Observe([]core.FlowEvent{{Kind: core.FlowBacklogged, Peer: 3, Quota: 2}}, nil)
	waitFor(t, "aimd's decision", 20*time.Second, func() bool { out = fc.Observe(nil, out); return len(out) > 0 })
	if out[0] != (core.FlowDecision{Kind: core.FlowSetQuota, Peer: 3, Value: 6}) {
		t.Fatalf("decision = %+v, want peer 3 grown by step = 4", out[0])
	}
}
