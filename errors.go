package gobtl

import (
	"github.com/gobtl/gobtl/boot/pmix"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// The errors a program branches on, with errors.Is: every error gobtl
// returns wraps one of these when it is for one of these reasons, with the
// component and the call that met it in its text ("pml: receive from 3
// tag 7: ..."). They are the values of the packages that raise them, so
// errors.Is matches through the re-export.
var (
	// ErrInvalid: a bad argument — a rank outside the communicator, a
	// tag outside 0..2³¹−1, a buffer too short, a request that is nil,
	// released or another job's, an element type a collective cannot
	// move. Nothing was started.
	ErrInvalid = pml.ErrInvalid
	// ErrTruncated: a message longer than its receive buffer. The
	// buffer holds what fit; the sender is unaffected.
	ErrTruncated = core.ErrTruncated
	// ErrPeerLost: a rank, or the connection to it, is gone. Every
	// request that involves it fails with it, and so does every
	// collective of a communicator it is a member of; receives from
	// AnySource fail with it until the loss is acknowledged (AckFailed).
	ErrPeerLost = core.ErrPeerLost
	// ErrUnreachable: no transport of the stack reaches the rank.
	ErrUnreachable = core.ErrUnreachable
	// ErrCanceled: a receive cancelled before it matched (Cancel).
	ErrCanceled = core.ErrCanceled
	// ErrMismatch: ranks called a collective with arguments that do not
	// fit together (different lengths).
	ErrMismatch = coll.ErrMismatch
	// ErrAborted: the job was given up (Abort, or another rank of
	// RunLocal failed); every blocking call returns it from then on.
	ErrAborted = core.ErrAborted
	// ErrClosed: a call on a closed communicator, or a transport that
	// closed under it.
	ErrClosed = core.ErrClosed
	// ErrStalled: a blocking call saw nothing move for the stack's
	// stall_timeout (job block; never by default), or a transport without
	// flow control found a peer's mailbox full for its stall bound. The
	// request stays pending.
	ErrStalled = core.ErrStalled
	// ErrNoResources: a transport ran out of something — send slots,
	// credits, read tokens. The PML waits and retries on its own, so a
	// program meets it only from a component that gives up.
	ErrNoResources = core.ErrNoResources
	// ErrNotSupported: an operation the component does not offer (Cancel
	// of a send, say).
	ErrNotSupported = core.ErrNotSupported
	// ErrBadFrame: a frame that failed validation (wrong version, bad
	// length, a peer not of this job). The connection it came on fails,
	// and with it the requests to that peer (ErrPeerLost).
	ErrBadFrame = core.ErrBadFrame
	// ErrNotBuilt: Init in a process started under PMIx (mpirun, srun
	// --mpi=pmix) by a program built without -tags pmix; the error says
	// how to rebuild or start it otherwise.
	ErrNotBuilt = pmix.ErrNotBuilt
)

// PendingError is the error a collective's Context form returns when its
// context ends before the collective is done on this rank. The collective
// is one operation of every rank — the others may be waiting for this
// rank's messages, or already past it — so it does not stop half-way: it
// goes on in the background as Request, which every Wait and Test of the
// job advances, and which completes when the collective does on this
// rank, or fails here (with the collective's error, ErrPeerLost if a
// member was lost). Until Request completes, the collective's buffers are
// in use: the transports may still read the send buffer and write the
// receive buffer. Wait for Request (Wait, WaitContext with a context of
// its own, the Test family) before touching them, or Free it and give
// them up. A collective that fails — Request's error, or a blocking
// call's — does not wait for those of its messages that cannot be
// cancelled (a receive already matched, a send): they may still complete
// into or out of its buffers, which a program that goes on after the
// failure gives up.
//
//	err := gobtl.AllreduceContext(ctx, c, x, sum, gobtl.Sum)
//	var p *gobtl.PendingError
//	if errors.As(err, &p) {
//		_, err = c.Wait(p.Request) // x and sum are the program's again
//	}
//
// PendingError wraps the context's error: errors.Is(err,
// context.DeadlineExceeded) holds for a deadline.
type PendingError = coll.PendingError
