package extoll_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/btltest"
	"github.com/gobtl/gobtl/btl/extoll"
	"github.com/gobtl/gobtl/core"

	_ "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
)

// The BTL conformance suite, over each transport of the software device.
// Flow control is the default (extoll_dynamic): the suite's back-pressure
// test needs Send to push back, which credits do and a blocking mailbox
// without them does not.
func TestConformance(t *testing.T) {
	btltest.Run(t, btltest.Config{
		Component: extoll.Name,
		Kill:      func(m core.Module) { m.(*extoll.Module).Abort() },
		Variants: []btltest.Variant{
			{Name: "shm", Params: map[string]string{"transport": "shm"}},
			// The allocation check runs with GOMAXPROCS=1 and a spinning
			// poller: every packet then waits for the network engine
			// goroutine to be preempted in (~10 ms a hop). The path above
			// the device is the one checked over shm.
			{Name: "tcp", Params: map[string]string{"transport": "tcp"}, NoAllocCheck: true},
			{Name: "small mailbox, no piggyback", Params: map[string]string{"slots_per_peer": "4", "piggyback": "false"}},
		},
	})
}
