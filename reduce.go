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
type Number = coll.Number

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

// opOf returns op over elements of type T as the collective layer takes
// it: package coll's typed operations, which allocate nothing.
func opOf[T Number](op Op) (coll.Op, error) {
	size := int(unsafe.Sizeof(*new(T)))
	switch op {
	case Sum:
		return coll.Sum[T](), nil
	case Prod:
		return coll.Prod[T](), nil
	case Min:
		return coll.Min[T](), nil
	case Max:
		return coll.Max[T](), nil
	case Band, Bor, Bxor:
		if coll.IsFloat[T]() {
			return coll.Op{}, fmt.Errorf("gobtl: %v of %v: bitwise operations are for integers: %w", op, reflect.TypeFor[T](), ErrInvalid)
		}
		switch op {
		case Band:
			return coll.Band(size), nil
		case Bor:
			return coll.Bor(size), nil
		}
		return coll.Bxor(size), nil
	}
	return coll.Op{}, fmt.Errorf("gobtl: no reduction operation %v: %w", op, ErrInvalid)
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
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func AllreduceContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.Allreduce(ctx, coll.Bytes(send), coll.Bytes(recv), o)
}

// Reduce combines the send vectors of every rank with op into root's recv
// (as long as send; the other ranks may pass nil). send may be recv on
// the root.
func Reduce[T Number](c *Comm, send, recv []T, op Op, root int) error {
	return ReduceContext(context.Background(), c, send, recv, op, root)
}

// ReduceContext is Reduce with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func ReduceContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op, root int) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.Reduce(ctx, coll.Bytes(send), coll.Bytes(recv), o, root)
}

// ReduceScatterBlock combines every rank's send — Size() blocks of
// len(recv) elements — with op and leaves block i of the result in rank
// i's recv.
func ReduceScatterBlock[T Number](c *Comm, send, recv []T, op Op) error {
	return ReduceScatterBlockContext(context.Background(), c, send, recv, op)
}

// ReduceScatterBlockContext is ReduceScatterBlock with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func ReduceScatterBlockContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.ReduceScatterBlock(ctx, coll.Bytes(send), coll.Bytes(recv), o)
}

// Scan leaves in rank i's recv the combination with op of the send
// vectors of ranks 0 to i. send may be recv.
func Scan[T Number](c *Comm, send, recv []T, op Op) error {
	return ScanContext(context.Background(), c, send, recv, op)
}

// ScanContext is Scan with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func ScanContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.Scan(ctx, coll.Bytes(send), coll.Bytes(recv), o)
}

// Exscan leaves in rank i's recv the combination with op of the send
// vectors of ranks 0 to i−1; rank 0's recv is left as it was.
func Exscan[T Number](c *Comm, send, recv []T, op Op) error {
	return ExscanContext(context.Background(), c, send, recv, op)
}

// ExscanContext is Exscan with a context.
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func ExscanContext[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	o, err := opOf[T](op)
	if err != nil {
		return err
	}
	return c.coll.Exscan(ctx, coll.Bytes(send), coll.Bytes(recv), o)
}

// userOp is a program's function as a coll.Fn.
type userOp[T any] struct{ f func(inout, in []T) }

func (u userOp[T]) Combine(inout, in []byte) { u.f(coll.View[T](inout), coll.View[T](in)) }

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
// A context that ends first makes it return a *PendingError, whose
// request says when the buffers are the caller's again.
func AllreduceFuncContext[T any](ctx context.Context, c *Comm, send, recv []T, f func(inout, in []T)) error {
	t := reflect.TypeFor[T]()
	if !plainData(t) || t.Size() == 0 {
		return fmt.Errorf("gobtl: AllreduceFunc of %v: elements must be plain data of non-zero size: %w", t, ErrInvalid)
	}
	if f == nil {
		return fmt.Errorf("gobtl: AllreduceFunc without a function: %w", ErrInvalid)
	}
	o := coll.Op{Size: int(t.Size()), Fn: userOp[T]{f}}
	return c.coll.Allreduce(ctx, coll.Bytes(send), coll.Bytes(recv), o)
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
