//go:build ofi && cgo

package ofi_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/btltest"
	"github.com/gobtl/gobtl/btl/ofi"
	"github.com/gobtl/gobtl/core"
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
)

// TestConformance runs the BTL conformance suite over each provider that
// runs on loopback here: tcp (under ofi_rxm), sockets and shm.
func TestConformance(t *testing.T) {
	for _, prov := range testProviders {
		t.Run(prov, func(t *testing.T) {
			requireProvider(t, prov)
			btltest.Run(t, btltest.Config{
				Component: ofi.Name,
				Params:    map[string]string{"provider": prov},
				Kill:      func(m core.Module) { ofi.Kill(m) },
				Variants: []btltest.Variant{
					// Open MPI's default layout: a per-peer class and three shared ones.
					{Name: "default layout"},
					// One small class, few send buffers: credits run out often.
					{Name: "small buffers", Params: map[string]string{"receive_queues": "P,2048,8,6,4", "eager_limit": "1KiB", "send_buffers": "8"}},
				},
			})
		})
	}
}
