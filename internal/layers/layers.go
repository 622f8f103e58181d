// Package layers reaches the layers under a *gobtl.Comm — its PML
// communicator and its collective layer — for the framework's own
// programs and tests: bench drives package coll's byte-level collectives,
// test/ reads the scheduler's weights and drives progress. What they use
// of the engine (Progress, Weights, Routes, State, the collectives' raw
// operations) is no part of the public API, so gobtl.Comm keeps its
// layers in unexported fields, and this package, which only this module
// may import, is the one way to them. Package gobtl registers the
// accessor at init; this package does not import gobtl (gobtl imports
// it), so the Comm comes in as an interface value.
package layers

import (
	"fmt"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/pml"
)

// of returns the layers of a *gobtl.Comm (set by Register).
var of func(c any) (*pml.Comm, *coll.Comm, bool)

// Register installs package gobtl's accessor; gobtl calls it from init.
func Register(f func(c any) (*pml.Comm, *coll.Comm, bool)) { of = f }

// Wrapper is a program's type that wraps a *gobtl.Comm to add to it
// (the simulator's job runner adds Compute); Of looks through it.
type Wrapper interface {
	// Wrapped returns the *gobtl.Comm inside.
	Wrapped() any
}

// Of returns the PML communicator and the collective layer under c, a
// *gobtl.Comm or a Wrapper of one, with ok false when c is neither.
func Of(c any) (p *pml.Comm, cc *coll.Comm, ok bool) {
	if of == nil {
		return nil, nil, false
	}
	if w, isW := c.(Wrapper); isW {
		c = w.Wrapped()
	}
	return of(c)
}

// PML returns the PML communicator under c, a *gobtl.Comm; it panics on
// anything else.
func PML(c any) *pml.Comm {
	p, _ := layers(c)
	return p
}

// Coll returns the collective layer of c, a *gobtl.Comm; it panics on
// anything else.
func Coll(c any) *coll.Comm {
	_, cc := layers(c)
	return cc
}

func layers(c any) (*pml.Comm, *coll.Comm) {
	p, cc, ok := Of(c)
	if !ok {
		panic(fmt.Sprintf("layers: %T is not a *gobtl.Comm", c))
	}
	return p, cc
}
