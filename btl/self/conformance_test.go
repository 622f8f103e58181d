package self_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/btltest"
	_ "github.com/gobtl/gobtl/btl/self"
)

func TestConformance(t *testing.T) {
	btltest.Run(t, btltest.Config{Component: "self", Loopback: true, Variants: []btltest.Variant{
		{Name: "defaults"},
		// Small frames: the queue grows while a handler sends from Progress.
		{Name: "small frames", Params: map[string]string{"max_send_size": "1KiB", "eager_limit": "512B"}},
	}})
}
