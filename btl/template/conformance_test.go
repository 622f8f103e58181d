package template

import (
	"os"
	"testing"

	"github.com/gobtl/gobtl/btl/btltest"
	"github.com/gobtl/gobtl/core"
)

// TestConformance runs the BTL conformance suite: a copy of this skeleton
// keeps it passing as the sockets give way to a device.
func TestConformance(t *testing.T) {
	btltest.Run(t, btltest.Config{
		Component: Name, Instance: "conformance",
		// A process that dies closes its sockets without a goodbye; what it
		// leaves on disk is the launcher's to remove.
		Kill: func(m core.Module) {
			m.(*Module).shutdown(false)
			os.RemoveAll(m.(*Module).dir)
		},
		Variants: []btltest.Variant{
			{Name: "defaults"},
			// Small frames and batches: more messages, Progress stops often.
			{Name: "small", Params: map[string]string{"max_send_size": "1KiB", "eager_limit": "512B", "batch": "1"}},
		},
	})
}
