package gobtl

import (
	"context"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gobtl/gobtl/coll"
)

// Number is an element type the built-in operations reduce: Go's
// integers and floats, and types defined on them.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// Op is a built-in reduction operation.
type Op uint8

// The built-in operations. Band, Bor and Bxor are for integers only.
const (
	Sum Op = iota + 1
	Prod
	Min
	Max
	Band
	Bor
	Bxor
)

var opNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max", Band: "band", Bor: "bor", Bxor: "bxor"}

func (op Op) String() string {
	if op >= Sum && int(op) < len(opNames) {
		return opNames[op]
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// The operations on a vector of T, as zero-size values: turning one into
// a coll.Fn allocates nothing, so a reduction in steady state allocates
// nothing either. Min and Max are Go's min and max, which propagate NaNs
// and order -0 before +0, so that they too give the same result whatever
// the order of their operands.
type (
	sumOp[T Number]  struct{}
	prodOp[T Number] struct{}
	minOp[T Number]  struct{}
	maxOp[T Number]  struct{}
	// The bitwise operations act on the bytes, which is the same on any
	// integer type.
	bandOp struct{}
	borOp  struct{}
	bxorOp struct{}
)

func (sumOp[T]) Combine(inout, in []byte) {
	a, b := view[T](inout), view[T](in)
	for i := range a {
		a[i] += b[i]
	}
}

func (prodOp[T]) Combine(inout, in []byte) {
	a, b := view[T](inout), view[T](in)
	for i := range a {
		a[i] *= b[i]
	}
}

func (minOp[T]) Combine(inout, in []byte) {
	a, b := view[T](inout), view[T](in)
	for i := range a {
		a[i] = min(a[i], b[i])
	}
}

func (maxOp[T]) Combine(inout, in []byte) {
	a, b := view[T](inout), view[T](in)
	for i := range a {
		a[i] = max(a[i], b[i])
	}
}

func (bandOp) Combine(inout, in []byte) {
	for i := range inout {
		inout[i] &= in[i]
	}
}

func (borOp) Combine(inout, in []byte) {
	for i := range inout {
		inout[i] |= in[i]
	}
}

func (bxorOp) Combine(inout, in []byte) {
	for i := range inout {
		inout[i] ^= in[i]
	}
}

// opOf returns op over elements of type T as the collective layer takes
// it.
func opOf[T Number](op Op) (coll.Op, error) {
	o := coll.Op{Size: int(unsafe.Sizeof(*new(T))), Commutative: true}
	switch op {
	case Sum:
		o.Fn = sumOp[T]{}
	case Prod:
		o.Fn = prodOp[T]{}
	case Min:
		o.Fn = minOp[T]{}
	case Max:
		o.Fn = maxOp[T]{}
	case Band, Bor, Bxor:
		if k := reflect.TypeFor[T]().Kind(); k == reflect.Float32 || k == reflect.Float64 {
			return o, fmt.Errorf("gobtl: %v of %v: bitwise operations are for integers: %w", op, reflect.TypeFor[T](), ErrInvalid)
		}
		switch op {
		case Band:
			o.Fn = bandOp{}
		case Bor:
			o.Fn = borOp{}
		default:
			o.Fn = bxorOp{}
		}
	default:
		return o, fmt.Errorf("gobtl: no reduction operation %v: %w", op, ErrInvalid)
	}
	return o, nil
}

// bytesOf is the memory of s as bytes.
func bytesOf[T any](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
}

// view is b as a vector of T. The collective layer hands the operations
// slices of the program's own vectors and of its scratch, which is 8-byte
// aligned, at offsets that are whole elements.
func view[T any](b []byte) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(*new(T))))
}

// Allreduce combines the send vectors of every rank of c with op, element
// by element, into every rank's recv (as long as send). send and recv may
// be the same slice (in place). Every rank passes vectors of one length.
//
// The order in which the ranks' values are combined depends only on the
// number of ranks, the length and the algorithm the decision picks for
// them (package coll says which order each follows), never on timing: a
// floating-point sum gives the same bits on every rank and from one run
// to the next.
func Allreduce[T Number](c *Comm, send, recv []T, op Op) error {
	return AllreduceContext(context.Background(), c, send, recv, op)
}

// AllreduceContext is Allreduce with a context.
func AllreduceContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.Allreduce(ctx, bytesOf(send), bytesOf(recv), o)
}

// Iallreduce starts an Allreduce; neither vector may be touched until its
// request completes.
func Iallreduce[T Number](c *Comm, send, recv []T, op Op) (*Request, error) {
	o, err := opOf[T](op)
	if err != nil {
		return nil, err
	}
	return c.coll.Iallreduce(bytesOf(send), bytesOf(recv), o)
}

// Reduce combines the send vectors of every rank with op into root's recv
// (as long as send; the other ranks may pass nil). send may be recv on
// the root.
func Reduce[T Number](c *Comm, send, recv []T, op Op, root int) error {
	return ReduceContext(context.Background(), c, send, recv, op, root)
}

// ReduceContext is Reduce with a context.
func ReduceContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op, root int) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.Reduce(ctx, bytesOf(send), bytesOf(recv), o, root)
}

// ReduceScatterBlock combines every rank's send — Size() blocks of
// len(recv) elements — with op and leaves block i of the result in rank
// i's recv.
func ReduceScatterBlock[T Number](c *Comm, send, recv []T, op Op) error {
	return ReduceScatterBlockContext(context.Background(), c, send, recv, op)
}

// ReduceScatterBlockContext is ReduceScatterBlock with a context.
func ReduceScatterBlockContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.ReduceScatterBlock(ctx, bytesOf(send), bytesOf(recv), o)
}

// Scan leaves in rank i's recv the combination with op of the send
// vectors of ranks 0 to i. send may be recv.
func Scan[T Number](c *Comm, send, recv []T, op Op) error {
	return ScanContext(context.Background(), c, send, recv, op)
}

// ScanContext is Scan with a context.
func ScanContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.Scan(ctx, bytesOf(send), bytesOf(recv), o)
}

// Exscan leaves in rank i's recv the combination with op of the send
// vectors of ranks 0 to i−1; rank 0's recv is left as it was.
func Exscan[T Number](c *Comm, send, recv []T, op Op) error {
	return ExscanContext(context.Background(), c, send, recv, op)
}

// ExscanContext is Exscan with a context.
func ExscanContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.Exscan(ctx, bytesOf(send), bytesOf(recv), o)
}

// userOp is a program's function as a coll.Fn.
type userOp[T any] struct{ f func(inout, in []T) }

func (u userOp[T]) Combine(inout, in []byte) { u.f(view[T](inout), view[T](in)) }

// AllreduceFunc is Allreduce with an operation of the program's own: f
// must set inout[i] to inout[i] ∘ in[i] for an associative ∘, where inout
// holds the combination of lower ranks than in does. ∘ need not commute:
// the ranks' vectors are combined in rank order. T must hold no pointers
// (no pointer, slice, string, map, channel, function or interface, at any
// depth): the vectors travel as bytes.
func AllreduceFunc[T any](c *Comm, send, recv []T, f func(inout, in []T)) error {
	return AllreduceFuncContext(context.Background(), c, send, recv, f)
}

// AllreduceFuncContext is AllreduceFunc with a context.
func AllreduceFuncContext[T any](ctx context.Context, c *Comm, send, recv []T, f func(inout, in []T)) error {
	t := reflect.TypeFor[T]()
	if !plainData(t) || t.Size() == 0 {
		return fmt.Errorf("gobtl: AllreduceFunc of %v: elements must be plain data of non-zero size: %w", t, ErrInvalid)
	}
	if f == nil {
		return fmt.Errorf("gobtl: AllreduceFunc without a function: %w", ErrInvalid)
	}
	o := coll.Op{Size: int(t.Size()), Fn: userOp[T]{f}}
	return c.coll.Allreduce(ctx, bytesOf(send), bytesOf(recv), o)
}

// plainData reports whether values of t are bytes alone, which may be
// copied to another process.
func plainData(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return plainData(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !plainData(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
