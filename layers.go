package gobtl

import (
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/internal/layers"
	"github.com/gobtl/gobtl/pml"
)

// The framework's own programs and tests reach a Comm's PML communicator
// and collective layer through package internal/layers, which no program
// outside this module can import: the engine's hooks (Progress, Weights,
// Routes, State, coll's raw operations) stay out of the public API.
func init() {
	layers.Register(func(c any) (*pml.Comm, *coll.Comm, bool) {
		x, ok := c.(*Comm)
		if !ok || x == nil {
			return nil, nil, false
		}
		return x.p, x.coll, true
	})
}
