// Package mailboxsplit is the mailbox arithmetic the two EXTOLL credit
// policies share (seed 003 §5.2, §6.3): a slot pool split into a data
// region for the senders' quotas and a credit region of creditSlots per
// sender, checked against Equation 2, data region >= credit region >= 1
// slot per process.
package mailboxsplit

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// Quota checks the layout of info's slot pool with creditSlots per sender
// and returns each sender's equal share of the data region and the data
// region. name prefixes errors.
func Quota(name string, info core.FlowInfo, creditSlots int) (share, data int, err error) {
	k, n := creditSlots, info.Senders
	switch {
	case info.Resource != core.ResourceSlotPool:
		return 0, 0, fmt.Errorf("%s: divides a %v (EXTOLL's mailbox), not %v; posted buffers (InfiniBand) have ib_hardware, ib_static and ib_dynamic", name, core.ResourceSlotPool, info.Resource)
	case k < 1:
		return 0, 0, fmt.Errorf("%s: credit_slots = %d, need at least 1 (Equation 2)", name, k)
	case n < 1:
		return 0, 0, fmt.Errorf("%s: no peers", name)
	}
	data = info.Buffers - k*n
	if data < k*n {
		return 0, 0, fmt.Errorf("%s: a mailbox of %d slots for %d peers leaves %d data slots beside a %d-slot credit region; Equation 2 needs at least %d slots (%d per peer)",
			name, info.Buffers, n, max(data, 0), k*n, 2*k*n, 2*k)
	}
	return data / n, data, nil
}

// CreditSlotsParam is the credit_slots parameter of both schemes: the
// slots each receiver owns in each sender's credit region, which are also
// each sender's static slots under the dynamic scheme.
var CreditSlotsParam = core.Param{Name: "credit_slots", Type: core.ParamInt, Default: "2", Min: "1",
	Doc: "slots of each sender's credit region owned by each receiver, and each sender's static slots under the dynamic scheme (seed 003 §5.3, §7: 2 is the best trade-off)"}

// Register registers an EXTOLL scheme as a flow-control component.
func Register(name, doc string, params []core.Param, build func(core.Params) core.FlowControl) {
	core.Register(&core.Component{Kind: core.KindFlowControl, Name: name, Doc: doc, Params: params,
		NewPolicy: func(p core.Params) (any, error) { return build(p), nil }})
}
