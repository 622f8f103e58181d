package inproc_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/btltest"
	_ "github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
)

func TestConformance(t *testing.T) {
	btltest.Run(t, btltest.Config{
		Component: "inproc", Instance: "conformance",
		// A rank that dies drops every connection it has.
		Kill: func(m core.Module) {
			for r := range 3 {
				m.Disconnect(r, nil)
			}
		},
		Variants: []btltest.Variant{
			{Name: "defaults"},
			// Few slots: every burst fills a ring.
			{Name: "tiny rings", Params: map[string]string{"slots": "4", "max_send_size": "1KiB", "eager_limit": "512B"}},
			// Delayed and jittered links: frames wait in the ring for their time.
			{Name: "delayed", Params: map[string]string{"delay": "20us", "jitter": "20us"}},
			{Name: "no rdma", Params: map[string]string{"rdma": "false"}},
		},
	})
}
