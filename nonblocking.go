package gobtl

import "github.com/gobtl/gobtl/coll"

// The non-blocking collectives (see the package doc's "Non-blocking
// collectives"): each builds its collective's schedule and hands it to
// the PML as a request (package coll, "Schedules"), so that every Wait
// and Test of the job advances it and it needs no goroutine. Functions
// all, Ibarrier too: Go methods cannot have type parameters, and one
// style for the family reads better than methods for some and functions
// for others.

// Ibarrier starts a barrier and returns at once: its request completes
// once every rank of c has entered it.
func Ibarrier(c *Comm) (*Request, error) { return c.coll.Ibarrier() }

// Ibcast starts a Bcast of buf from root and returns at once; buf is in
// use until the request completes.
func Ibcast[T any](c *Comm, buf []T, root int) (*Request, error) {
	if err := plainElems[T]("ibcast"); err != nil {
		return nil, err
	}
	return c.coll.Ibcast(coll.Bytes(buf), root)
}

// Ireduce starts a Reduce of every rank's send with op into root's recv
// and returns at once; both are in use until the request completes.
func Ireduce[T Number](c *Comm, send, recv []T, op Op, root int) (*Request, error) {
	o, err := opOf[T](op)
	if err != nil {
		return nil, err
	}
	return c.coll.Ireduce(coll.Bytes(send), coll.Bytes(recv), o, root)
}

// Iallreduce starts an Allreduce of every rank's send with op into every
// rank's recv and returns at once; both are in use until the request
// completes.
func Iallreduce[T Number](c *Comm, send, recv []T, op Op) (*Request, error) {
	o, err := opOf[T](op)
	if err != nil {
		return nil, err
	}
	return c.coll.Iallreduce(coll.Bytes(send), coll.Bytes(recv), o)
}

// Igather starts a Gather of every rank's send into root's recv and
// returns at once; both are in use until the request completes.
func Igather[T any](c *Comm, send, recv []T, root int) (*Request, error) {
	if err := plainElems[T]("igather"); err != nil {
		return nil, err
	}
	return c.coll.Igather(coll.Bytes(send), coll.Bytes(recv), root)
}

// Iscatter starts a Scatter of root's send into every rank's recv and
// returns at once; both are in use until the request completes.
func Iscatter[T any](c *Comm, send, recv []T, root int) (*Request, error) {
	if err := plainElems[T]("iscatter"); err != nil {
		return nil, err
	}
	return c.coll.Iscatter(coll.Bytes(send), coll.Bytes(recv), root)
}

// Iallgather starts an Allgather of every rank's send into every rank's
// recv and returns at once; both are in use until the request completes.
func Iallgather[T any](c *Comm, send, recv []T) (*Request, error) {
	if err := plainElems[T]("iallgather"); err != nil {
		return nil, err
	}
	return c.coll.Iallgather(coll.Bytes(send), coll.Bytes(recv))
}

// Ialltoall starts an Alltoall — block i of send to rank i, rank i's
// block into block i of recv — and returns at once; both are in use until
// the request completes.
func Ialltoall[T any](c *Comm, send, recv []T) (*Request, error) {
	block, err := alltoallBlock[T](c, "ialltoall", len(send), len(recv))
	if err != nil {
		return nil, err
	}
	return c.coll.Ialltoall(coll.Bytes(send), coll.Bytes(recv), block)
}
