package pml

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// Op is an operation of a layer above the PML made of many messages — a
// collective's schedule of rounds — that one Request stands for, so that
// a program completes it with the same Wait and Test family as a send
// (Open MPI's non-blocking collectives are requests of libnbc, progressed
// by opal_progress in the same way).
type Op interface {
	// Advance makes what progress the operation can without blocking —
	// tests its requests, starts its next ones, combines what arrived —
	// and reports whether it has finished, and with what error. The PML
	// calls it from the waits, tests and probes of any goroutine, outside
	// its lock, never from two goroutines at once and never again once
	// it has reported done.
	Advance() (done bool, err error)
}

// Start returns a request that completes when op reports done; every
// wait and test of the job advances op meanwhile. The caller may advance
// op itself before Start (to post its first messages at once), never
// after.
func (c *Comm) Start(op Op) (*Request, error) {
	e := c.e
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("pml: start: %w", core.ErrClosed)
	}
	r := e.newRequest(reqOp, 0, c.g, -1, 0, nil)
	r.src = -1
	r.op = op
	e.mu.Unlock()
	e.opMu.Lock()
	e.ops = append(e.ops, r)
	e.nops.Add(1)
	e.opMu.Unlock()
	return r, nil
}

// runOps advances every started operation once, unless another goroutine
// is doing so, and completes the requests of those that finish. It
// returns how many finished, and whether progress handled events
// meanwhile (the operations' own polls, or another goroutine's): a
// waiter whose own poll found nothing is then still making progress. It
// is called without the engine lock: an operation posts and tests its
// messages through the Comm like any caller.
func (e *engine) runOps() (finished int, events bool) {
	if e.nops.Load() == 0 || !e.opMu.TryLock() {
		return 0, false
	}
	defer e.opMu.Unlock()
	e.mu.Lock()
	ev := e.events
	e.mu.Unlock()
	n := 0
	for i := 0; i < len(e.ops); {
		r := e.ops[i]
		done, err := r.op.Advance()
		if !done {
			i++
			continue
		}
		copy(e.ops[i:], e.ops[i+1:])
		e.ops[len(e.ops)-1] = nil
		e.ops = e.ops[:len(e.ops)-1]
		e.nops.Add(-1)
		e.mu.Lock()
		r.op = nil
		e.complete(r, err)
		e.mu.Unlock()
		n++
	}
	e.mu.Lock()
	moved := e.events != ev
	e.mu.Unlock()
	return n, moved
}
