package inproc_test

import (
	"testing"

	_ "github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/test/btltest"
)

// kill drops every connection of m's rank, as if its process had died.
func kill(m core.Module) {
	d := m.(core.Disconnecter)
	for r := range 3 {
		d.Disconnect(r, nil)
	}
}

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name   string
		params map[string]string
	}{
		{"defaults", nil},
		// Few slots: every burst fills a ring.
		{"tiny rings", map[string]string{"slots": "4", "max_send_size": "1KiB", "eager_limit": "512B"}},
		// Delayed and jittered links: frames wait in the ring for their time.
		{"delayed", map[string]string{"delay": "20us", "jitter": "20us"}},
		{"no rdma", map[string]string{"rdma": "false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			btltest.Run(t, btltest.Config{Component: "inproc", Instance: "conformance", Params: c.params, Kill: kill})
		})
	}
}
