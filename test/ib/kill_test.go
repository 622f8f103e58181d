package ib

import (
	"testing"

	"github.com/gobtl/gobtl/btl/ib"
	"github.com/gobtl/gobtl/core"
)

// kill makes the ranks behind mods look dead to their peers.
func kill(t *testing.T, mods []core.Module) {
	t.Helper()
	for _, m := range mods {
		if err := ib.Kill(m); err != nil {
			t.Fatal(err)
		}
	}
}
