package self_test

import (
	"testing"

	_ "github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/test/btltest"
)

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name   string
		params map[string]string
	}{
		{"defaults", nil},
		// Small frames: the queue grows while a handler sends from Progress.
		{"small frames", map[string]string{"max_send_size": "1KiB", "eager_limit": "512B"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			btltest.Run(t, btltest.Config{Component: "self", Params: c.params, Loopback: true})
		})
	}
}
