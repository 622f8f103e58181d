package gobtl

import "github.com/gobtl/gobtl/coll"

// The non-blocking collectives: each starts the collective and returns at
// once with a *Request that completes when the collective is done on this
// rank, as MPI's MPI_Ibcast and the like. The collective is a schedule of
// messages and local steps that the PML advances whenever any Wait or
// Test of the job runs (package coll, "Schedules"), so it progresses
// while the program computes between tests, and needs no goroutine.
//
// They are all functions taking the communicator first, Ibarrier as the
// typed ones: Go methods cannot have type parameters, and one style for
// the whole family reads better than methods for some and functions for
// others. Each is its blocking form's twin in arguments, element types
// and rules (typed.go, reduce.go), with these for the request:
//
//   - Its buffers are in use from the call until the request completes:
//     neither read nor write them (a send buffer included) until Wait or
//     a Test that reports completion returns.
//   - Every rank starts the job's collectives in the same order, blocking
//     and non-blocking alike; several may be in flight at once.
//   - The request is completed once, by the Wait/Test family (with other
//     requests of any kind in the same Waitall), or dropped with Free. It
//     cannot be cancelled (Cancel does nothing).
//   - Arguments wrong on this rank fail the call (ErrInvalid) and start
//     nothing. Failures met on the way — ErrPeerLost, ErrMismatch,
//     ErrTruncated — complete the request with the error.

// Ibarrier starts a barrier: its request completes once every rank of c
// has entered it.
func Ibarrier(c *Comm) (*Request, error) { return c.coll.Ibarrier() }

// Ibcast starts a Bcast of buf from root.
func Ibcast[T any](c *Comm, buf []T, root int) (*Request, error) {
	if err := plainElems[T]("ibcast"); err != nil {
		return nil, err
	}
	return c.coll.Ibcast(coll.Bytes(buf), root)
}

// Ireduce starts a Reduce of every rank's send with op into root's recv.
func Ireduce[T Number](c *Comm, send, recv []T, op Op, root int) (*Request, error) {
	o, err := opOf[T](op)
	if err != nil {
		return nil, err
	}
	return c.coll.Ireduce(coll.Bytes(send), coll.Bytes(recv), o, root)
}

// Iallreduce starts an Allreduce of every rank's send with op into every
// rank's recv.
func Iallreduce[T Number](c *Comm, send, recv []T, op Op) (*Request, error) {
	o, err := opOf[T](op)
	if err != nil {
		return nil, err
	}
	return c.coll.Iallreduce(coll.Bytes(send), coll.Bytes(recv), o)
}

// Igather starts a Gather of every rank's send into root's recv.
func Igather[T any](c *Comm, send, recv []T, root int) (*Request, error) {
	if err := plainElems[T]("igather"); err != nil {
		return nil, err
	}
	return c.coll.Igather(coll.Bytes(send), coll.Bytes(recv), root)
}

// Iscatter starts a Scatter of root's send into every rank's recv.
func Iscatter[T any](c *Comm, send, recv []T, root int) (*Request, error) {
	if err := plainElems[T]("iscatter"); err != nil {
		return nil, err
	}
	return c.coll.Iscatter(coll.Bytes(send), coll.Bytes(recv), root)
}

// Iallgather starts an Allgather of every rank's send into every rank's
// recv.
func Iallgather[T any](c *Comm, send, recv []T) (*Request, error) {
	if err := plainElems[T]("iallgather"); err != nil {
		return nil, err
	}
	return c.coll.Iallgather(coll.Bytes(send), coll.Bytes(recv))
}

// Ialltoall starts an Alltoall: block i of send to rank i, rank i's block
// into block i of recv.
func Ialltoall[T any](c *Comm, send, recv []T) (*Request, error) {
	block, err := alltoallBlock[T](c, "ialltoall", len(send), len(recv))
	if err != nil {
		return nil, err
	}
	return c.coll.Ialltoall(coll.Bytes(send), coll.Bytes(recv), block)
}
