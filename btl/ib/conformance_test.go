package ib_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/btltest"
	"github.com/gobtl/gobtl/btl/ib"
	"github.com/gobtl/gobtl/core"
)

// TestConformance runs the BTL conformance suite on ib/softrc. The suite
// checks that frames from one sender arrive in order; the ib BTL keeps
// order per receive queue (one RC QP each), not across queues, so the
// layouts here have one queue each — per-peer with credits, and shared —
// and the multi-queue layouts (B-SRQ, Open MPI's default) are checked by
// this package's own tests and by the PML tests in test/ib, where the PML
// restores the order by PSN (seed 001 §5).
func TestConformance(t *testing.T) {
	btltest.Run(t, btltest.Config{
		Component: "ib",
		Kill:      func(m core.Module) { ib.Kill(m) },
		Variants: []btltest.Variant{
			{Name: "per-peer queue", Params: map[string]string{"receive_queues": "P,65536,16,12,8", "eager_limit": "12KiB"}},
			{Name: "shared queue", Params: map[string]string{"receive_queues": "S,65536,64,48,16", "eager_limit": "12KiB"}},
			{Name: "small per-peer queue", Params: map[string]string{"receive_queues": "P,2048,8,6,4", "eager_limit": "1KiB", "send_queue": "8"}},
		},
	})
}
