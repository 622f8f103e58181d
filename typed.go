package gobtl

import (
	"context"
	"fmt"
	"math"
	"reflect"

	"github.com/gobtl/gobtl/coll"
)

// The collectives that move data without combining it, over slices of any
// plain-data element type: Go's numbers and bools, and arrays and structs
// of them ([3]float64, struct{ X, Y float32; ID int64 }). Go methods
// cannot have type parameters, so these are functions that take the
// communicator first, as the reductions of reduce.go are; the Comm's
// methods of the same names are their []byte forms. Counts, displacements
// and blocks are in elements of T.
//
// The elements travel as their bytes (the backing array of the slice,
// viewed as bytes, with no copy), which is sound only for types that hold
// no pointer: an element type with a pointer, slice, string, map,
// channel, function or interface anywhere in it, or of size zero, makes
// the call fail with ErrInvalid. The bytes are taken as they are, so
// every rank must lay T out alike: the same program, or the same type on
// the same architecture.

// plainElems reports, as an error wrapping ErrInvalid, an element type
// whose values are not bytes alone.
func plainElems[T any](what string) error {
	t := reflect.TypeFor[T]()
	if t.Size() == 0 || !plainData(t) {
		return fmt.Errorf("gobtl: %s of %v: elements must be plain data of non-zero size: %w", what, t, ErrInvalid)
	}
	return nil
}

// elemsInBytes returns v (counts or displacements in elements of size
// bytes) in bytes, in buf when it is long enough. A value that would not
// fit becomes -1, which the collective rejects as out of range.
func elemsInBytes(buf []int, v []int, size int) []int {
	if size == 1 {
		return v
	}
	out := buf[:0]
	if len(v) > cap(buf) {
		out = make([]int, 0, len(v))
	}
	for _, x := range v {
		if x > math.MaxInt/size {
			x = -1
		}
		out = append(out, x*size)
	}
	return out
}

// vscratch holds the byte counts and displacements of a typed v-form for
// communicators of up to 64 ranks on the stack.
type vscratch [64]int

// Bcast copies root's buf into every rank's buf: every rank passes a buf
// of the same length (ErrMismatch otherwise).
func Bcast[T any](c *Comm, buf []T, root int) error {
	return BcastContext(context.Background(), c, buf, root)
}

// BcastContext is Bcast with a context. A context that ends first makes
// it return a *PendingError, whose request says when buf is the caller's
// again.
func BcastContext[T any](ctx context.Context, c *Comm, buf []T, root int) error {
	if err := plainElems[T]("bcast"); err != nil {
		return err
	}
	return c.coll.Bcast(ctx, coll.Bytes(buf), root)
}

// Gather collects every rank's send into root's recv, in rank order: rank
// i's elements land at recv[i*len(send):]. Every rank sends as many
// elements; recv (at least Size()·len(send) long) matters on the root
// only, and send may be the root's own block of recv.
func Gather[T any](c *Comm, send, recv []T, root int) error {
	return GatherContext(context.Background(), c, send, recv, root)
}

// GatherContext is Gather with a context. A context that ends first makes
// it return a *PendingError, whose request says when the buffers are the
// caller's again.
func GatherContext[T any](ctx context.Context, c *Comm, send, recv []T, root int) error {
	if err := plainElems[T]("gather"); err != nil {
		return err
	}
	return c.coll.Gather(ctx, coll.Bytes(send), coll.Bytes(recv), root)
}

// Gatherv collects rank i's send (counts[i] elements) into root's
// recv[displs[i]:]; counts and displs matter on the root only.
func Gatherv[T any](c *Comm, send, recv []T, counts, displs []int, root int) error {
	return GathervContext(context.Background(), c, send, recv, counts, displs, root)
}

// GathervContext is Gatherv with a context. A context that ends first
// makes it return a *PendingError, whose request says when the buffers
// are the caller's again.
func GathervContext[T any](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) error {
	if err := plainElems[T]("gatherv"); err != nil {
		return err
	}
	var cb, db vscratch
	size := int(reflect.TypeFor[T]().Size())
	return c.coll.Gatherv(ctx, coll.Bytes(send), coll.Bytes(recv),
		elemsInBytes(cb[:], counts, size), elemsInBytes(db[:], displs, size), root)
}

// Scatter sends block i of root's send — len(recv) elements at
// send[i*len(recv):] — to rank i's recv. send (at least Size()·len(recv)
// long) matters on the root only; recv may be the root's own block of
// send.
func Scatter[T any](c *Comm, send, recv []T, root int) error {
	return ScatterContext(context.Background(), c, send, recv, root)
}

// ScatterContext is Scatter with a context. A context that ends first
// makes it return a *PendingError, whose request says when the buffers
// are the caller's again.
func ScatterContext[T any](ctx context.Context, c *Comm, send, recv []T, root int) error {
	if err := plainElems[T]("scatter"); err != nil {
		return err
	}
	return c.coll.Scatter(ctx, coll.Bytes(send), coll.Bytes(recv), root)
}

// Scatterv sends counts[i] elements at root's send[displs[i]:] to rank
// i's recv; counts and displs matter on the root only.
func Scatterv[T any](c *Comm, send, recv []T, counts, displs []int, root int) error {
	return ScattervContext(context.Background(), c, send, recv, counts, displs, root)
}

// ScattervContext is Scatterv with a context. A context that ends first
// makes it return a *PendingError, whose request says when the buffers
// are the caller's again.
func ScattervContext[T any](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) error {
	if err := plainElems[T]("scatterv"); err != nil {
		return err
	}
	var cb, db vscratch
	size := int(reflect.TypeFor[T]().Size())
	return c.coll.Scatterv(ctx, coll.Bytes(send), coll.Bytes(recv),
		elemsInBytes(cb[:], counts, size), elemsInBytes(db[:], displs, size), root)
}

// Allgather gathers every rank's send into every rank's recv, in rank
// order: rank i's elements land at recv[i*len(send):]. Every rank sends
// as many elements; send may be this rank's own block of recv.
func Allgather[T any](c *Comm, send, recv []T) error {
	return AllgatherContext(context.Background(), c, send, recv)
}

// AllgatherContext is Allgather with a context. A context that ends first
// makes it return a *PendingError, whose request says when the buffers
// are the caller's again.
func AllgatherContext[T any](ctx context.Context, c *Comm, send, recv []T) error {
	if err := plainElems[T]("allgather"); err != nil {
		return err
	}
	return c.coll.Allgather(ctx, coll.Bytes(send), coll.Bytes(recv))
}

// Allgatherv gathers rank i's send (counts[i] elements) into every rank's
// recv[displs[i]:].
func Allgatherv[T any](c *Comm, send, recv []T, counts, displs []int) error {
	return AllgathervContext(context.Background(), c, send, recv, counts, displs)
}

// AllgathervContext is Allgatherv with a context. A context that ends
// first makes it return a *PendingError, whose request says when the
// buffers are the caller's again.
func AllgathervContext[T any](ctx context.Context, c *Comm, send, recv []T, counts, displs []int) error {
	if err := plainElems[T]("allgatherv"); err != nil {
		return err
	}
	var cb, db vscratch
	size := int(reflect.TypeFor[T]().Size())
	return c.coll.Allgatherv(ctx, coll.Bytes(send), coll.Bytes(recv),
		elemsInBytes(cb[:], counts, size), elemsInBytes(db[:], displs, size))
}

// Alltoall sends block i of send to rank i and receives rank i's block
// into block i of recv, where send and recv hold Size() blocks of equal
// length (len(recv)/Size() elements each; ErrInvalid when len(send) and
// len(recv) differ or do not divide). send may be recv (in place).
func Alltoall[T any](c *Comm, send, recv []T) error {
	return AlltoallContext(context.Background(), c, send, recv)
}

// AlltoallContext is Alltoall with a context. A context that ends first
// makes it return a *PendingError, whose request says when the buffers
// are the caller's again.
func AlltoallContext[T any](ctx context.Context, c *Comm, send, recv []T) error {
	block, err := alltoallBlock[T](c, "alltoall", len(send), len(recv))
	if err != nil {
		return err
	}
	return c.coll.Alltoall(ctx, coll.Bytes(send), coll.Bytes(recv), block)
}

// alltoallBlock checks a typed alltoall's element type and lengths and
// returns its block in bytes.
func alltoallBlock[T any](c *Comm, what string, ns, nr int) (int, error) {
	if err := plainElems[T](what); err != nil {
		return 0, err
	}
	if n := c.Size(); ns != nr || nr%n != 0 {
		return 0, fmt.Errorf("gobtl: %s of %d elements into %d: want two lengths alike that %d ranks divide: %w", what, ns, nr, n, ErrInvalid)
	}
	return nr / c.Size() * int(reflect.TypeFor[T]().Size()), nil
}

// Alltoallv sends sendCounts[i] elements at send[sendDispls[i]:] to rank
// i and receives recvCounts[i] elements from rank i into
// recv[recvDispls[i]:].
func Alltoallv[T any](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) error {
	return AlltoallvContext(context.Background(), c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// AlltoallvContext is Alltoallv with a context. A context that ends first
// makes it return a *PendingError, whose request says when the buffers
// are the caller's again.
func AlltoallvContext[T any](ctx context.Context, c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) error {
	if err := plainElems[T]("alltoallv"); err != nil {
		return err
	}
	var sc, sd, rc, rd vscratch
	size := int(reflect.TypeFor[T]().Size())
	return c.coll.Alltoallv(ctx, coll.Bytes(send), elemsInBytes(sc[:], sendCounts, size), elemsInBytes(sd[:], sendDispls, size),
		coll.Bytes(recv), elemsInBytes(rc[:], recvCounts, size), elemsInBytes(rd[:], recvDispls, size))
}
