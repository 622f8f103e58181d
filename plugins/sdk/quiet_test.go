package sdk

import (
	"reflect"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/internal/wire"
)

// stater answers every batch with a quota change and a FlowQuiet.
type stater struct{}

func (stater) Setup(core.FlowInfo) (core.FlowSetup, error) { return core.FlowSetup{}, nil }
func (stater) Observe(_ []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	return append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: 1, Value: 9}, core.FlowDecision{Kind: core.FlowQuiet, Peer: 1, Value: 9})
}

// A host that takes FlowQuiet statements says so (wire.EnvQuiet) and gets
// them; an older one, which would hand them to its engine as decisions,
// gets the answer without them.
func TestQuietStatementsGoOnlyToAHostThatTakesThem(t *testing.T) {
	all := []core.FlowDecision{{Kind: core.FlowSetQuota, Peer: 1, Value: 9}, {Kind: core.FlowQuiet, Peer: 1, Value: 9}}
	for _, c := range []struct {
		env  string
		want []core.FlowDecision
	}{{"1", all}, {"", all[:1]}} {
		t.Setenv(wire.EnvQuiet, c.env)
		fs := newFlowService(&server{})
		if got := fs.answer(stater{}, []core.FlowEvent{{Kind: core.FlowMonitor, Peer: 1, Quota: 9}}, nil); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%s=%q: answer %v, want %v", wire.EnvQuiet, c.env, got, c.want)
		}
	}
}
