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
// others. RunLocal
// runs the ranks of a job as goroutines of one process over the in-process
// fabric, for tests and examples.
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

// Re-exported so programs need import only this package.
const (
	AnySource = pml.AnySource
	AnyTag    = pml.AnyTag
)

// Status describes a completed request.
type Status = pml.Status

// Request is a non-blocking operation.
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
}

// Comm is a communicator: all the job's ranks (Init, RunLocal) or some of
// them (Split). Its point-to-point calls are the PML's; its collectives
// are package coll's (see collective.go).
//
// Several goroutines may use a Comm at once for point-to-point: sends,
// receives, probes, Cancel and Free, and the Wait/Test family on
// different requests (one goroutine at a time per request). Any of them
// advances the job's non-blocking collectives. Collectives must be called
// in the same order on every rank, so on one communicator they come from
// one goroutine at a time, or in an order the program fixes; Dup gives
// each goroutine a communicator of its own. Close comes last, once.
type Comm struct {
	*pml.Comm
	coll    *coll.Comm
	closers []io.Closer
	// boot is the bootstrap Init made from the environment, finalized or
	// dropped at Close; nil when the caller gave one (Options.Boot).
	boot core.Bootstrap
	// aborter ends the whole job through its engine (nil: none can).
	aborter core.Aborter
	once    sync.Once
	err     error
}

// Abort gives up on the job: this rank's blocking calls fail with
// core.ErrAborted and cause (pml.Comm.Abort), and the engine that
// started the job — `gobtl run`, mpirun, srun, mpiexec.hydra — is asked to
// end every rank (PMIx_Abort, PMI's abort), this one included, as
// MPI_Abort does. The program should then exit with a non-zero status.
// Ranks of RunLocal only abort each other.
func (c *Comm) Abort(cause error) {
	c.Comm.Abort(cause)
	if c.aborter != nil {
		msg := "gobtl: aborted"
		if cause != nil {
			msg = fmt.Sprintf("gobtl: rank %d aborted: %v", c.Rank(), cause)
		}
		c.aborter.Abort(1, msg)
	}
}

// Close closes the communicator, its transports and its policies. A rank
// that closes cleanly — not aborted, every step without error — then
// tells the engine it is done (PMIx_Finalize, PMI's finalize); one that
// failed does not, so that the engine sees an abnormal end and ends the
// job, and the program's non-zero exit status reaches mpirun or srun.
func (c *Comm) Close() error {
	c.once.Do(func() {
		errs := []error{c.Comm.Close()}
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
		// "exiting improperly") and fails the whole job. Only an aborted
		// job skips it.
		if f, ok := c.boot.(core.Finalizer); ok && c.Comm.Aborted() == nil {
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
// rank's blocking calls return an error wrapping core.ErrAborted (see
// pml.Comm.Abort), and the first failure comes first in the result.
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
