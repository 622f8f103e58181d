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
