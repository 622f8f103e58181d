// Package gobtl is the embedding API of the gobtl message-transport
// framework: Init reads a stack file (HCL), opens the BTL components and
// policies it names, and returns a communicator of the job's ranks.
//
//	comm, err := gobtl.Init(ctx, gobtl.Options{})   // under `gobtl run`
//	defer comm.Close()
//	err = comm.Send(buf, peer, tag)
//
// The job's wire-up comes from the environment of the engine that started
// it — `gobtl run` on one host; Open MPI's mpirun or srun --mpi=pmix
// through PMIx (programs built with -tags pmix); srun --mpi=pmi2 or MPICH's
// mpiexec.hydra through PMI-2 — or from Options.Boot; a program started
// alone is a job of one rank (see package boot). The engine also says
// which ranks share a node: shared memory serves those, the network the
// others. RunLocal runs the ranks of a job as goroutines of one process
// over the in-process fabric, for tests and examples.
//
// # Point-to-point
//
// A Comm's Send, Recv, Isend, Irecv, Probe and Iprobe move []byte
// messages between two ranks, matched by source, tag and communicator as
// MPI matches them: messages from one rank to another that a receive
// could match alike arrive in the order they were sent. Isend and Irecv
// return a *Request; the Wait/Test family (Wait, Test, Waitall, Testany,
// ...) completes requests of every kind, collectives' included, and each
// call of it also advances the job's pending work.
//
// # Collectives
//
// Every rank of a communicator calls its collectives in the same order.
// They come as methods of Comm over []byte (Barrier, Bcast, Gather,
// Alltoall, ...) and as generic functions over []T (Bcast, Gather,
// Allgather, Alltoall and their v-forms for any plain-data T; Allreduce,
// Reduce, Scan and the other reductions for T a Number): Go methods cannot
// have type parameters.
//
// A typed collective moves its elements as their bytes, with no copy: T
// must hold no pointer (no pointer, slice, string, map, channel, function
// or interface at any depth) and have a non-zero size, or the call fails
// with ErrInvalid; and every rank must lay T out alike (the same program
// on the same architecture).
//
// # Non-blocking collectives
//
// Ibarrier, Ibcast, Ireduce, Iallreduce, Igather, Iscatter, Iallgather and
// Ialltoall start their collective and return at once with a *Request,
// as MPI_Ibcast and the like do; each is its blocking form's twin in
// arguments and element types, and all are functions, taking the
// communicator first. Every Wait and Test of the job advances them, so
// they progress while the program computes between tests. The rules:
//
//   - The buffers are in use from the call until the request completes:
//     neither read nor write them (a send buffer included) until Wait, or
//     a Test that reports completion, returns.
//   - Every rank starts the job's collectives in the same order, blocking
//     and non-blocking alike; several may be in flight at once.
//   - The request is completed once by the Wait/Test family (with requests
//     of any kind in one Waitall), or dropped with Free; it cannot be
//     cancelled.
//   - Arguments wrong on this rank fail the call (ErrInvalid) and start
//     nothing; failures met on the way — ErrPeerLost, ErrMismatch,
//     ErrTruncated — complete the request with the error.
//
// # Contexts
//
// Every blocking call has a form that takes a context first. A
// point-to-point or completion call whose context ends returns ctx.Err()
// (RecvContext cancels its receive if it has not matched; Wait leaves the
// request pending). A collective cannot stop half-way on one rank — the
// others are in it too — so a collective whose context ends returns a
// *PendingError: the collective goes on in the background as the error's
// Request, and its buffers are in use until that request completes.
//
// # Errors
//
// Errors wrap the sentinels of this package (ErrInvalid, ErrPeerLost,
// ErrTruncated, ErrAborted, ...; see the var block) for errors.Is, with
// the component and the call in their text. Besides those named on each
// call, every call may fail with ErrInvalid (a rank outside the
// communicator, a tag outside 0..2³¹−1, a request that is nil, released or
// another job's), ErrClosed (a closed communicator), ErrAborted (the job
// was given up: Abort, or a failed rank of RunLocal); and a blocking call
// with ErrStalled once nothing has moved for the stack's stall_timeout
// (never, by default).
//
// Importing gobtl compiles in the components listed in components.go.
package gobtl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// AnySource and AnyTag are the receive and probe wildcards: a message from
// any rank, with any tag.
const (
	AnySource = pml.AnySource
	AnyTag    = pml.AnyTag
)

// Status describes a completed receive, send or collective: Source and
// Tag of the message a receive matched, Count the bytes it received (or
// a send sent), and Err its error (wrapping ErrTruncated, ErrPeerLost,
// ErrCanceled and the like), nil on success.
type Status = pml.Status

// Request is a non-blocking send, receive or collective in progress
// (Isend, Irecv, Ibcast, ...). It has no methods of its own: the Comm's
// Wait/Test family completes it — Wait, Test, their all/any/some forms —
// and Free drops it. Each request is completed or freed exactly once,
// after which it must not be used again (it is recycled, as MPI sets a
// handle to MPI_REQUEST_NULL). Any goroutine may wait on or test a
// request, one at a time.
type Request = pml.Request

// EnvConfig names the environment variable holding the stack file(s) of a
// job (comma-separated), as `gobtl run -c` sets it.
const EnvConfig = "GOBTL_CONFIG"

// Options configure Init.
type Options struct {
	// ConfigFiles are the stack files. Empty: $GOBTL_CONFIG, else the
	// default stack (self, plus shared memory or the in-process fabric).
	ConfigFiles []string
	// Config is an already loaded configuration; it wins over ConfigFiles.
	Config *conf.Config
	// Vars override the stack's variables.
	Vars map[string]string
	// Boot is the job's bootstrap. Nil: the launcher's environment, else a
	// job of one rank.
	Boot core.Bootstrap
	// Metrics receives every component's counters; nil: a new registry.
	Metrics *core.Metrics
	// Clock is the time source of mechanisms; nil: the system clock.
	Clock core.Clock

	// inProcess says the job's ranks are goroutines of this process
	// (RunLocal, or a job of one rank), whose default stack is the
	// in-process fabric.
	inProcess bool
	// quiet silences the job's logs whatever the stack or GOBTL_LOG says
	// (CheckStart: its ranks are a check, not the job).
	quiet bool
}

// Comm is a communicator: all the job's ranks (Init, RunLocal) or some of
// them (Split), and a context that keeps its messages apart from those of
// every other communicator (Dup). Ranks are numbered 0 to Size()−1.
//
// Point-to-point (p2p.go) moves []byte buffers between two ranks, by
// rank and tag, with MPI's matching and ordering rules: blocking calls
// (Send, Recv, Probe) with forms that take a context, non-blocking ones
// (Isend, Irecv) that return a *Request completed by the Wait/Test
// family. Collectives (collective.go) are calls every rank makes in the
// same order: methods over []byte, and generic functions over []T
// (Bcast, Allreduce, ...; typed.go, reduce.go), blocking or not (Ibcast,
// Iallreduce, ...).
//
// Several goroutines may use a Comm at once for point-to-point: sends,
// receives, probes, Cancel and Free, and the Wait/Test family on
// different requests (one goroutine at a time per request). Any of them
// advances the job's non-blocking collectives. Collectives must be called
// in the same order on every rank, so on one communicator they come from
// one goroutine at a time, or in an order the program fixes; Dup gives
// each goroutine a communicator of its own. Close comes last, once.
type Comm struct {
	p       *pml.Comm  // point-to-point and completion: the PML's communicator
	coll    *coll.Comm // the collectives over p
	closers []io.Closer
	// boot is the bootstrap Init made from the environment, finalized or
	// dropped at Close; nil when the caller gave one (Options.Boot).
	boot core.Bootstrap
	// aborter ends the whole job through its engine (nil: none can).
	aborter core.Aborter
	once    sync.Once
	err     error
}

// Abort gives up on the job: every blocking call of this rank in progress
// (from any goroutine) and every one to come returns an error wrapping
// ErrAborted and cause, and the engine that started the job — `gobtl
// run`, mpirun, srun, mpiexec.hydra — is asked to end every rank
// (PMIx_Abort, PMI's abort), this one included, as MPI_Abort does. The
// program should then exit with a non-zero status. Ranks of RunLocal only
// abort each other. Abort is safe from any goroutine and more than once
// (the first cause stays).
func (c *Comm) Abort(cause error) {
	c.p.Abort(cause)
	if c.aborter != nil {
		msg := "gobtl: aborted"
		if cause != nil {
			msg = fmt.Sprintf("gobtl: rank %d aborted: %v", c.Rank(), cause)
		}
		c.aborter.Abort(1, msg)
	}
}

// Close ends the communicator. Closing the one Init or RunLocal gave
// finalizes the job for this rank, like MPI_Finalize, and is collective:
// it sends what this rank still owes its peers, waits (boundedly) until
// every rank has done the same, and closes the transports and policies;
// communicators made by Dup and Split then become unusable, and closing
// them does nothing. A rank that closes cleanly — not aborted, the other
// ranks met — then tells the engine it is done (PMIx_Finalize, PMI's
// finalize, `gobtl run`'s); one that failed does not, so that the engine
// sees an abnormal end and ends the job, and the program's exit status
// reaches mpirun or srun. A rank that ends without Close fails its job
// however it exits, status 0 included, and the engine tells the others.
//
// After a failure Close does not wait for peers that may never come:
// after an abort or a lost peer it meets no one; after an operation of
// this rank failed (a truncated receive, a stall, a collective's
// ErrMismatch) it waits for them FailedFinalize (2 s) at most, not the
// usual 30 s. Deferred directly (defer comm.Close()) while the goroutine
// panics, it sees the panic: it aborts the communicator — no finalize, no
// wait — and panics again with the same value, so that the rank dies at
// once, its panic printed (marked "[recovered, repanicked]"), and the
// engine stops the job. Close is called once, last.
func (c *Comm) Close() error {
	// recover works only in the deferred function itself: here, when the
	// program defers Close directly, as the package doc does.
	if v := recover(); v != nil {
		c.p.Abort(fmt.Errorf("gobtl: rank %d panicked: %v", c.p.Rank(), v))
		panic(v)
	}
	c.once.Do(func() {
		perr := c.p.Close()
		errs := []error{perr}
		for _, cl := range c.closers {
			errs = append(errs, cl.Close())
		}
		c.err = errors.Join(errs...)
		if c.boot == nil {
			return
		}
		// A transport's error at close (a peer that left first and
		// closed its link under an ACK still in flight) is this rank's to
		// report, but the job did end: the engine still hears a
		// finalize, or it takes the rank for one that died (mpirun:
		// "exiting improperly") and fails the whole job. An aborted job
		// skips it, and so does a rank whose finalize did not meet the
		// others (ErrStalled): they may be blocked on it, and the engine
		// must end the job and tell them.
		met := !errors.Is(perr, core.ErrStalled)
		if f, ok := c.boot.(core.Finalizer); ok && c.p.Aborted() == nil && met {
			if err := f.Finalize(); err != nil {
				c.err = errors.Join(c.err, fmt.Errorf("gobtl: finalize the bootstrap: %w", err))
			}
			return
		}
		closeBoot(c.boot)
	})
	return c.err
}

// closeBoot drops a bootstrap without finalizing it.
func closeBoot(b core.Bootstrap) {
	if cl, ok := b.(io.Closer); ok {
		cl.Close()
	}
}

// RunLocal runs fn on every rank of an n-rank job whose ranks are
// goroutines of this process, connected by the in-process fabric (the
// default stack) or by the stack opts names. It returns when every rank
// has returned, with their errors joined. A rank that returns an error
// ends the job, as the launcher does when a process dies: every other
// rank's blocking calls return an error wrapping ErrAborted (see
// Comm.Abort), and the first failure comes first in the result.
func RunLocal(ctx context.Context, n int, opts Options, fn func(c *Comm) error) error {
	if n <= 0 {
		return fmt.Errorf("gobtl: RunLocal needs at least one rank, not %d", n)
	}
	return runLocal(ctx, localJob(n), opts, true, fn)
}

// runLocal is RunLocal over the given bootstraps, one rank each; with
// inProcess the default stack is the in-process fabric, else the stack a
// process of such a job would get (tests of locality give boots from
// boot.GroupOn).
func runLocal(ctx context.Context, boots []core.Bootstrap, opts Options, inProcess bool, fn func(c *Comm) error) error {
	n := len(boots)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	// A rank that fails ends the job, as the launcher stops the other
	// processes: the others' blocking calls return core.ErrAborted, and
	// those still in Init see the context end.
	var (
		mu     sync.Mutex
		comms  = make([]*Comm, n)
		failed error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed != nil {
			return
		}
		failed = err
		cancel()
		for _, c := range comms {
			if c != nil {
				c.Abort(err)
			}
		}
	}
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			o := opts
			o.Boot, o.inProcess = boots[r], inProcess
			o.Metrics = nil
			c, err := Init(ctx, o)
			if err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				fail(errs[r])
				return
			}
			defer c.Close()
			mu.Lock()
			comms[r] = c
			if failed != nil {
				c.Abort(failed)
			}
			mu.Unlock()
			if err := fn(c); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				fail(errs[r])
			}
		}(r)
	}
	wg.Wait()
	// Ranks that stopped only because another failed add nothing but
	// noise: report the failure that ended the job first.
	if failed != nil {
		var rest []error
		for _, err := range errs {
			if err != nil && err != failed && !errors.Is(err, core.ErrAborted) && !errors.Is(err, context.Canceled) {
				rest = append(rest, err)
			}
		}
		return errors.Join(append([]error{failed}, rest...)...)
	}
	return errors.Join(errs...)
}
