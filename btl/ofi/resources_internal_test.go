//go:build ofi && cgo

package ofi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/core"
	ibstatic "github.com/gobtl/gobtl/policies/flowcontrol/ib_static"
)

// TestPreferRendezvousWhileAPerPeerClassIsOutOfCredits checks
// PreferRendezvous against the credits: false while the per-peer class
// has credits or when the policy does not ask for rendezvous, true from
// the frame that spends the last credit until the receiver returns them.
func TestPreferRendezvousWhileAPerPeerClassIsOutOfCredits(t *testing.T) {
	for _, rndv := range []bool{true, false} {
		for _, prov := range providersHere {
			t.Run(fmt.Sprintf("%s/rndv=%v", prov, rndv), func(t *testing.T) {
				flow := func() core.FlowControl { return &ibstatic.Policy{PrePost: 4, Threshold: 2, Rndv: rndv} }
				j := openFlowJob(t, prov, 2, map[string]string{"receive_queues": "P,2048,8,6,4", "eager_limit": "1KiB"}, flow)
				var got int
				j.mods[1].Register(core.TypeEager, func(*core.Header, []byte) { got++ })
				res := j.ep(0, 1).(core.Resources)
				j.until("the session up", func() bool { return j.mods[0].peers[1].tx == txUp })
				sent := 0
				for ; sent < 100; sent++ {
					if res.PreferRendezvous() {
						break
					}
					err := j.ep(0, 1).Send(core.Header{Type: core.TypeEager}, nil, []byte("x"), 0)
					for k := 0; errors.Is(err, errBusy) && k < 1e6; k++ {
						j.mods[0].Progress() // the provider's queue, not the credits
						err = j.ep(0, 1).Send(core.Header{Type: core.TypeEager}, nil, []byte("x"), 0)
					}
					if errors.Is(err, errNoCredit) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if sent != 4 {
					t.Fatalf("rndv %v: %d frames went before PreferRendezvous or a refusal, want the 4 credits", rndv, sent)
				}
				if res.PreferRendezvous() != rndv {
					t.Fatalf("out of credits: PreferRendezvous = %v, want %v", !rndv, rndv)
				}
				j.until("the frames and the credits back", func() bool { return got == sent && !res.PreferRendezvous() && j.mods[0].peers[1].cred[0].avail > 0 })
			})
		}
	}
}

// TestFramesSentWithoutFlowControlAreOwedNothing checks the no-credit
// bit (the CQ data's, which untagged frames of the first class carry as
// well as tagged ones): frames sent with core.SendNoFlowControl, past the
// sender's window, spend no credit and leave the receiver owing none.
func TestFramesSentWithoutFlowControlAreOwedNothing(t *testing.T) {
	for _, prov := range providersHere {
		for _, layout := range []string{"P,2048,4,3,4", "P,256,4,3,4:S,2048,64,32,4"} {
			t.Run(prov+"/"+layout, func(t *testing.T) {
				j := openTestJob(t, prov, 2, map[string]string{"receive_queues": layout, "eager_limit": "1KiB"})
				got := 0
				j.mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { got++ })
				const n = 40
				for _, size := range []int{8, 1000} {
					for range n {
						j.send(0, 1, core.Header{Type: core.TypeUserBase}, nil, make([]byte, size), core.SendNoFlowControl)
					}
				}
				j.until("the frames", func() bool { return got == 2*n })
				for ci, c := range j.mods[1].classes {
					if owed := j.mods[1].peers[0].owed[ci]; owed != 0 {
						t.Errorf("class %d: the receiver owes %d credits for frames that spent none", ci, owed)
					}
					if avail := j.mods[0].peers[1].cred[ci].avail; avail != c.window {
						t.Errorf("class %d: the sender holds %d credits, want its window %d", ci, avail, c.window)
					}
				}
			})
		}
	}
}
