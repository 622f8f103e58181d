package sm_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/btltest"
	"github.com/gobtl/gobtl/btl/sm"
	"github.com/gobtl/gobtl/core"
)

func TestConformance(t *testing.T) {
	btltest.Run(t, btltest.Config{
		Component: "sm",
		Params:    map[string]string{"liveness_interval": "1ms", "close_timeout": "100ms"},
		Kill:      func(m core.Module) { m.(*sm.Module).Abort() },
		Variants: []btltest.Variant{
			{Name: "cma", Params: map[string]string{"single_copy": "cma"}},
			{Name: "none", Params: map[string]string{"single_copy": "none"}},
			// Tiny rings and few fragments: every frame wraps, skips or waits.
			{Name: "tiny", Params: map[string]string{"fastbox_size": "1KiB", "fastbox_max": "300B", "fragments": "2",
				"max_send_size": "2KiB", "eager_limit": "1KiB"}},
		},
	})
}
