package coll

import (
	"reflect"
	"unsafe"
)

// Number is an element type the built-in operations reduce: Go's
// integers and floats, and types defined on them.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// The built-in operations on vectors of Go numbers. They are zero-size
// values, so turning one into an Fn allocates nothing and a reduction in
// steady state allocates nothing either. A reduction's local combine runs
// over whole blocks of a vector (hundreds of KiB for a large allreduce),
// so its loop is the collective's arithmetic cost: the sums of 4- and
// 8-byte elements, the common case, have vector kernels (add_amd64.s)
// that do what the scalar loop does element by element — the same
// rounding, so the same bits — eight lanes at a time; the others are
// tight loops without bounds checks.

// Sum adds vectors of T.
func Sum[T Number]() Op {
	o := Op{Size: sizeOf[T](), Commutative: true}
	switch k := reflect.TypeFor[T]().Kind(); {
	case k == reflect.Float32:
		o.Fn = addF32{}
	case k == reflect.Float64:
		o.Fn = addF64{}
	case isInt(k) && o.Size == 4:
		o.Fn = addI32{}
	case isInt(k) && o.Size == 8:
		o.Fn = addI64{}
	default:
		o.Fn = sumOp[T]{}
	}
	return o
}

// Prod multiplies vectors of T.
func Prod[T Number]() Op { return Op{Size: sizeOf[T](), Commutative: true, Fn: prodOp[T]{}} }

// Min keeps the smaller of each pair of elements: Go's min, which
// propagates NaNs and orders -0 before +0, so that the result does not
// depend on the order of the operands either.
func Min[T Number]() Op { return Op{Size: sizeOf[T](), Commutative: true, Fn: minOp[T]{}} }

// Max keeps the larger of each pair of elements (Go's max).
func Max[T Number]() Op { return Op{Size: sizeOf[T](), Commutative: true, Fn: maxOp[T]{}} }

// Band, Bor and Bxor are the bitwise operations on vectors of integers of
// size bytes: they act on the bytes, which is the same on any integer
// type.
func Band(size int) Op { return Op{Size: size, Commutative: true, Fn: bandOp{}} }

// Bor is the bitwise or (see Band).
func Bor(size int) Op { return Op{Size: size, Commutative: true, Fn: borOp{}} }

// Bxor is the bitwise exclusive or (see Band).
func Bxor(size int) Op { return Op{Size: size, Commutative: true, Fn: bxorOp{}} }

// IsFloat reports whether T is a floating-point type, for which the
// bitwise operations are not defined.
func IsFloat[T Number]() bool {
	k := reflect.TypeFor[T]().Kind()
	return k == reflect.Float32 || k == reflect.Float64
}

func isInt(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Uintptr }

func sizeOf[T any]() int { return int(unsafe.Sizeof(*new(T))) }

// View is b as a vector of T. The collective layer hands the operations
// slices of the program's own vectors and of its scratch, which is 8-byte
// aligned, at offsets that are whole elements.
func View[T any](b []byte) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sizeOf[T]())
}

// Bytes is the memory of s as bytes.
func Bytes[T any](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*sizeOf[T]())
}

type (
	sumOp[T Number]  struct{}
	prodOp[T Number] struct{}
	minOp[T Number]  struct{}
	maxOp[T Number]  struct{}
	bandOp           struct{}
	borOp            struct{}
	bxorOp           struct{}
	addF32           struct{}
	addF64           struct{}
	addI32           struct{}
	addI64           struct{}
)

// The re-slicing of b to a's length lets the compiler drop the bounds
// checks of the loops.

func (sumOp[T]) Combine(inout, in []byte) {
	a, b := View[T](inout), View[T](in)
	b = b[:len(a)]
	for i := range a {
		a[i] += b[i]
	}
}

func (prodOp[T]) Combine(inout, in []byte) {
	a, b := View[T](inout), View[T](in)
	b = b[:len(a)]
	for i := range a {
		a[i] *= b[i]
	}
}

func (minOp[T]) Combine(inout, in []byte) {
	a, b := View[T](inout), View[T](in)
	b = b[:len(a)]
	for i := range a {
		a[i] = min(a[i], b[i])
	}
}

func (maxOp[T]) Combine(inout, in []byte) {
	a, b := View[T](inout), View[T](in)
	b = b[:len(a)]
	for i := range a {
		a[i] = max(a[i], b[i])
	}
}

func (bandOp) Combine(inout, in []byte) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] &= in[i]
	}
}

func (borOp) Combine(inout, in []byte) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] |= in[i]
	}
}

func (bxorOp) Combine(inout, in []byte) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] ^= in[i]
	}
}

// kernel names a vector sum (add_amd64.s): of float32, float64, 4-byte
// and 8-byte integers.
type kernel uint8

const (
	vaddF32 kernel = iota
	vaddF64
	vaddI32
	vaddI64
)

// The sums with vector kernels: vadd runs the kernel over the whole
// 32-byte lanes (when the processor has it) and returns how many bytes it
// did; the scalar loop finishes.

func (addF32) Combine(inout, in []byte) {
	d := vadd(vaddF32, inout, in)
	sumOp[float32]{}.Combine(inout[d:], in[d:])
}

func (addF64) Combine(inout, in []byte) {
	d := vadd(vaddF64, inout, in)
	sumOp[float64]{}.Combine(inout[d:], in[d:])
}

func (addI32) Combine(inout, in []byte) {
	d := vadd(vaddI32, inout, in)
	sumOp[uint32]{}.Combine(inout[d:], in[d:])
}

func (addI64) Combine(inout, in []byte) {
	d := vadd(vaddI64, inout, in)
	sumOp[uint64]{}.Combine(inout[d:], in[d:])
}
