package plugins

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// The built-in policies a failed plugin hands over to, when its block says
// on_failure = "fallback" (the default). Each is the conservative choice
// of its kind: it keeps the mechanism's parameters where the plugin left
// them rather than exploring, and it is pure in-process code that cannot
// fail the way a process can.
var (
	// FallbackFlowControl is chosen by the resource the policy was set up
	// for (core.FlowInfo.Resource); a policy set up for none gets
	// "ib_static".
	FallbackFlowControl = map[core.FlowResource]string{core.ResourcePostedBuffers: "ib_static", core.ResourceSlotPool: "extoll_static"}
	// FallbackRecvBuf is the receive-buffer fallback.
	FallbackRecvBuf = "perpeer"
	// FallbackSched is the scheduling fallback.
	FallbackSched = "round_robin"
)

// holdName is how the logs call the last-resort fallback.
const holdName = "hold (no built-in fallback compiled in)"

// fallbackOf makes a kind's fallback: the built-in named by pick from the
// infos the plugin was set up with.
func fallbackOf[I, S, E, D any](kind core.Kind, pick func([]I) string) func([]I, []S) (core.Policy[I, S, E, D], string, error) {
	return func(infos []I, results []S) (core.Policy[I, S, E, D], string, error) {
		return builtinOrHold[I, S, E, D](kind, pick(infos), results)
	}
}

var (
	flowFallback = fallbackOf[core.FlowInfo, core.FlowSetup, core.FlowEvent, core.FlowDecision](core.KindFlowControl, func(infos []core.FlowInfo) string {
		if len(infos) > 0 {
			if n, ok := FallbackFlowControl[infos[0].Resource]; ok {
				return n
			}
		}
		return "ib_static"
	})
	recvFallback = fallbackOf[core.RecvInfo, core.RecvSetup, core.RecvEvent, core.RecvDecision](core.KindRecvBuf,
		func([]core.RecvInfo) string { return FallbackRecvBuf })
	schedFallback = fallbackOf[core.SchedInfo, core.SchedSetup, core.SchedEvent, core.SchedDecision](core.KindSched,
		func([]core.SchedInfo) string { return FallbackSched })
)

// builtinOrHold builds the registered built-in kind/name with its default
// parameters, or, when none is compiled in, a policy that proposes nothing
// and answers a new Setup as the plugin last did.
func builtinOrHold[I, S, E, D any](kind core.Kind, name string, results []S) (core.Policy[I, S, E, D], string, error) {
	c, ok := core.Lookup(kind, name)
	if !ok {
		return &hold[I, S, E, D]{results: results}, holdName, nil
	}
	params, err := core.NewParams(c.Params)
	if err != nil {
		return nil, name, err
	}
	v, err := c.NewPolicy(params)
	if err != nil {
		return nil, name, err
	}
	p, ok := v.(core.Policy[I, S, E, D])
	if !ok {
		return nil, name, fmt.Errorf("built-in %s %q is a %T, not a %s policy", kind, name, v, kind)
	}
	return p, name, nil
}

// hold is the fallback of last resort: no decisions (the mechanism keeps
// the parameters it has), and a new Setup gets the plugin's last answer.
type hold[I, S, E, D any] struct{ results []S }

func (h *hold[I, S, E, D]) Setup(I) (S, error) {
	if len(h.results) == 0 {
		var zero S
		return zero, fmt.Errorf("the plugin failed before any Setup and no built-in fallback is compiled in")
	}
	return h.results[len(h.results)-1], nil
}

func (h *hold[I, S, E, D]) Observe(_ []E, out []D) []D { return out }
