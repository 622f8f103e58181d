// Package ibcredit is what the three InfiniBand flow-control policies of
// seed 000 (ib_hardware, ib_static, ib_dynamic) share: the resource they
// serve, the parameters they have in common and their checks.
package ibcredit

import (
	"fmt"
	"strings"

	"github.com/gobtl/gobtl/core"
)

// Threshold is seed 000's explicit-credit threshold (§6.3.1: "we use a
// relatively small threshold value of 5").
const Threshold = 5

// InfiniteRNRRetry is the rnr_retry value that retries forever (IBA): what
// the hardware scheme holds senders back with and what the optimistic
// credit frames of the user-level schemes rely on (§4.1–4.2).
const InfiniteRNRRetry = 7

// CheckResource refuses a resource other than posted receive buffers:
// the schemes count the buffers a receiver pre-posts per peer on RC
// connections and rely on the device's RNR retry.
func CheckResource(name string, info core.FlowInfo) error {
	if info.Resource != core.ResourcePostedBuffers {
		return fmt.Errorf("%s: divides %v (InfiniBand's per-peer receive queues), not a %v; a slot pool (EXTOLL's mailbox) has extoll_static and extoll_dynamic", name, core.ResourcePostedBuffers, info.Resource)
	}
	return nil
}

// Params common to the schemes: pre_post is ib_hardware's and
// ib_static's (ib_dynamic starts from initial and grows); the other two
// are the user-level schemes'.
var (
	PrePostParam = core.Param{Name: "pre_post", Type: core.ParamInt, Default: "0", Min: "0",
		Doc: "receive buffers posted per peer on each per-peer queue (under credits, the credits a sender starts with); 0 keeps the receive layout's count (seed 000 §6: 10, 100, 1)"}
	ThresholdParam = core.Param{Name: "credit_threshold", Type: core.ParamInt, Default: fmt.Sprint(Threshold), Min: "1", Max: "65535",
		Doc: "an explicit credit message goes out when this many credits are owed (or all the peer's buffers are) and no frame carried them (seed 000: 5)"}
	RndvParam = core.Param{Name: "rndv_on_no_credit", Type: core.ParamBool, Default: "true",
		Doc: "send small messages by rendezvous while the peer is out of credits, so that the handshake brings credits back (seed 000 §4.2)"}
)

// Credits is the setup the user-level schemes share: credits for initial
// buffers per peer growing to at most max, infinite RNR retry for the
// optimistic explicit credit messages.
func Credits(initial, max, threshold int, rndv bool) core.FlowSetup {
	return core.FlowSetup{Scheme: core.FlowCredits, Quota: initial, MaxQuota: max, CreditThreshold: threshold,
		RndvOnNoCredit: rndv, RNRRetry: InfiniteRNRRetry}
}

// Register registers an InfiniBand scheme as a flow-control component,
// and under the name it had before its ib_ prefix said which transport it
// serves (hardware, static, dynamic): stack files that use that name
// still load, with a warning. build is the scheme's New.
func Register[P core.FlowControl](name, doc string, params []core.Param, build func(core.Params) P) {
	core.Register(&core.Component{Kind: core.KindFlowControl, Name: name, Deprecated: []string{strings.TrimPrefix(name, "ib_")},
		Doc: doc, Params: params, NewPolicy: func(p core.Params) (any, error) { return build(p), nil }})
}
