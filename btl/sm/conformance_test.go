package sm_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/btltest"
	"github.com/gobtl/gobtl/btl/sm"
	"github.com/gobtl/gobtl/core"
)

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name   string
		params map[string]string
	}{
		{"cma", map[string]string{"single_copy": "cma"}},
		{"none", map[string]string{"single_copy": "none"}},
		// Tiny rings and few fragments: every frame wraps, skips or waits.
		{"tiny", map[string]string{"fastbox_size": "1KiB", "fastbox_max": "300B", "fragments": "2",
			"max_send_size": "2KiB", "eager_limit": "1KiB"}},
	} {
		c.params["liveness_interval"] = "1ms"
		c.params["close_timeout"] = "100ms"
		t.Run(c.name, func(t *testing.T) {
			btltest.Run(t, btltest.Config{
				Component: "sm",
				Params:    c.params,
				Kill:      func(m core.Module) { m.(*sm.Module).Abort() },
			})
		})
	}
}
