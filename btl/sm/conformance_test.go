package sm_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/sm"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/test/btltest"
)

func TestConformance(t *testing.T) {
	for _, mode := range []string{"cma", "none"} {
		t.Run(mode, func(t *testing.T) {
			btltest.Run(t, btltest.Config{
				Component: "sm",
				Params:    map[string]string{"single_copy": mode, "liveness_interval": "1ms", "close_timeout": "100ms"},
				Kill:      func(m core.Module) { m.(*sm.Module).Abort() },
			})
		})
	}
}
