package coll

import (
	"context"
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// PML is what the collective layer needs of the point-to-point
// communicator it runs over, declared here where it is consumed: package
// pml's *Comm implements it, and coll names no concrete communicator. The
// request, status and operation types are the PML's own, since the
// requests of a non-blocking collective are waited on as any other.
type PML interface {
	Rank() int
	Size() int
	// Metrics is the registry the collectives count their calls into.
	Metrics() *core.Metrics

	// Isend, Irecv, Cancel, Free and Testall post, cancel, drop and
	// test a round's messages, as for any program.
	Isend(buf []byte, dest, tag int) (*pml.Request, error)
	Irecv(buf []byte, source, tag int) (*pml.Request, error)
	Cancel(r *pml.Request) error
	Free(r *pml.Request) error
	Testall(rs []*pml.Request, sts []pml.Status) (bool, error)

	// IsendExchange is Isend for one half of an exchange step, which a
	// transport may move otherwise than a one-way message.
	IsendExchange(buf []byte, dest, tag int) (*pml.Request, error)
	// TrySend sends a round's small message at once, with no request,
	// or reports false having sent nothing.
	TrySend(buf []byte, dest, tag int) (bool, error)
	// Finished is Testall without a poll, for a schedule the PML
	// advances beside a poll of its own.
	Finished(rs []*pml.Request, sts []pml.Status) (bool, error)
	// WaitRound waits for the messages of a blocking collective's round,
	// failing when a member is lost.
	WaitRound(ctx context.Context, rs []*pml.Request, sts []pml.Status, op fmt.Stringer) error
	// Start hands a schedule to the PML as a request that every wait and
	// test of the job advances.
	Start(op pml.Op) (*pml.Request, error)
	// Lost reports a lost member, which a round may wait on for ever.
	Lost() error
	// Iprobe looks for a message not yet received (agree.go: a message
	// of the collective a round waits in, under another signature).
	Iprobe(source, tag int) (bool, pml.Status, error)
	// Failed tells the PML that a collective failed here in a way that
	// may leave the other ranks waiting on this one (ErrMismatch).
	Failed(err error)
	// NextContext is the lowest context id this rank has not handed
	// out, which Split and Dup agree on.
	NextContext() uint32
}

// Communicator is a PML that also makes the communicators the collective
// layer runs on: its own collective context, on which only collectives
// send (Collectives), and the communicators of Split and Dup (Derive).
// Its methods return the implementation's own type P — Go has no
// covariant results, so New takes the type as a parameter rather than an
// interface whose methods would return the interface.
type Communicator[P any] interface {
	PML
	// Collectives is the communicator on its collective context: the
	// same ranks, a context of their own.
	Collectives() P
	// Derive is the communicator over ranks (ranks of this one, in the
	// new one's order) with context id ctx, which every member agreed on.
	Derive(ctx uint32, ranks []int) (P, error)
}
