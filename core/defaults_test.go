package core

import (
	"strings"
	"testing"
)

// windowPolicy is a flow-control policy that remembers its window.
type windowPolicy struct{ window int }

func (windowPolicy) Setup(FlowInfo) (FlowSetup, error)                        { return FlowSetup{}, nil }
func (windowPolicy) Observe(_ []FlowEvent, out []FlowDecision) []FlowDecision { return out }

// defaultsBTL opens no module; it hands back the env it was given.
var gotEnv BTLEnv

func init() {
	Register(&Component{Kind: KindFlowControl, Name: "test_window",
		Params:    []Param{{Name: "window", Type: ParamInt, Default: "4"}},
		NewPolicy: func(p Params) (any, error) { return windowPolicy{p.Int("window")}, nil }})
	Register(&Component{Kind: KindBTL, Name: "test_defaults",
		Params:   []Param{{Name: "window", Type: ParamInt, Default: "0"}, {Name: "rate", Type: ParamInt, Default: "1"}},
		Defaults: map[Kind]string{KindFlowControl: "test_window"},
		OpenBTL:  func(env BTLEnv) ([]Module, error) { gotEnv = env; return nil, nil }})
	Register(&Component{Kind: KindBTL, Name: "test_missing_default",
		Defaults: map[Kind]string{KindRecvBuf: "no_such_layout"},
		OpenBTL:  func(env BTLEnv) ([]Module, error) { return nil, nil }})
}

func openDefaults(t *testing.T, set map[string]string, flow FlowControl) error {
	t.Helper()
	c, _ := Lookup(KindBTL, "test_defaults")
	p := MustParams(c.Params)
	for k, v := range set {
		if err := p.SetText(k, v); err != nil {
			t.Fatal(err)
		}
	}
	gotEnv = BTLEnv{}
	_, err := c.OpenBTL(BTLEnv{Params: p, FlowControl: flow})
	return err
}

func TestABTLGetsItsDefaultPolicyWhenTheJobHasNone(t *testing.T) {
	if err := openDefaults(t, nil, nil); err != nil {
		t.Fatal(err)
	}
	if p, ok := gotEnv.FlowControl.(windowPolicy); !ok || p.window != 4 {
		t.Fatalf("flow control %#v, want the default with its own window 4", gotEnv.FlowControl)
	}
	if gotEnv.RecvBuffers != nil {
		t.Fatalf("a receive-buffer policy the component does not name: %#v", gotEnv.RecvBuffers)
	}
}

func TestTheBTLBlockSetsTheParametersItSharesWithItsDefault(t *testing.T) {
	if err := openDefaults(t, map[string]string{"window": "9", "rate": "3"}, nil); err != nil {
		t.Fatal(err)
	}
	if p := gotEnv.FlowControl.(windowPolicy); p.window != 9 {
		t.Fatalf("window %d, want the block's 9", p.window)
	}
}

func TestTheJobsPolicyReplacesTheDefault(t *testing.T) {
	mine := windowPolicy{window: 1}
	if err := openDefaults(t, nil, mine); err != nil || gotEnv.FlowControl != FlowControl(mine) {
		t.Fatalf("flow control %#v (%v), want the job's", gotEnv.FlowControl, err)
	}
	// A block parameter that would only configure the replaced default is
	// a mistake, said so.
	if err := openDefaults(t, map[string]string{"window": "9"}, mine); err == nil || !strings.Contains(err.Error(), "set it in the policy block") {
		t.Fatalf("error %v, want one pointing at the policy block", err)
	}
}

func TestADefaultThatIsNotLinkedInIsAClearError(t *testing.T) {
	c, _ := Lookup(KindBTL, "test_missing_default")
	if _, err := c.OpenBTL(BTLEnv{}); err == nil || !strings.Contains(err.Error(), `"no_such_layout", is not linked in`) {
		t.Fatalf("error %v", err)
	}
}

func TestAFormerNameFindsTheComponent(t *testing.T) {
	Register(&Component{Kind: KindFlowControl, Name: "test_renamed", Deprecated: []string{"test_old"},
		NewPolicy: func(Params) (any, error) { return windowPolicy{}, nil }})
	c, ok := Lookup(KindFlowControl, "test_old")
	if !ok || c.Name != "test_renamed" {
		t.Fatalf("lookup of the former name: %v, %v", c, ok)
	}
	for _, c := range Components(KindFlowControl) {
		if c.Name == "test_old" {
			t.Fatal("the former name is listed as a component of its own")
		}
	}
}
