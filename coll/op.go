package coll

import "unsafe"

// Op is a reduction operation on vectors of fixed-size elements held as
// bytes. The root package builds them from its typed operations (Sum,
// Max, … over a Go number type) and from a user's function.
type Op struct {
	// Size is the size of one element in bytes; vectors are multiples.
	Size int
	// Fn combines the vectors.
	Fn Fn
	// Commutative lets an algorithm combine in any fixed order (the ring
	// and Rabenseifner's need it).
	Commutative bool
}

// Fn is the combining function of an Op. It is an interface, not a func,
// so that the root package's typed operations — zero-size values of a
// generic type — become one without allocating.
type Fn interface {
	// Combine combines in into inout element by element: inout[i] =
	// inout[i] ∘ in[i]. When the operation does not commute, inout holds
	// the part of the lower ranks; the algorithms keep rank order then.
	Combine(inout, in []byte)
}

// Func is a plain function as an Fn.
type Func func(inout, in []byte)

// Combine calls f.
func (f Func) Combine(inout, in []byte) { f(inout, in) }

func (o Op) valid() bool { return o.Size > 0 && o.Fn != nil }

// addr is the address of b's first byte.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
