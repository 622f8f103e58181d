package pml

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
)

// PeerLost fails the virtual channel to job rank rank, as a module's
// OnPeerLost would: every pending operation on it completes with an error
// wrapping core.ErrPeerLost and err, and every later one fails at once.
// It is how the job's engine reports a rank that ended without finalizing
// (core.PeerWatcher): the launcher reaps the process the moment it ends,
// where a transport notices only when it next talks to the peer — after
// its retries, over a network — or never, for a peer it has not connected
// to.
//
// Unlike the modules' reports, which come from inside Progress, it is
// called from the bootstrap's own goroutine: it takes the engine's lock,
// which ends the lock's bias to the goroutine that drives the engine (one
// membarrier, then a mutex for every call). A lost peer is rare and ends
// the job's fast path anyway; no message pays for the notice before it
// comes. It does nothing for this rank itself, a rank out of range, or
// after Close.
func (c *Comm) PeerLost(rank int, err error) {
	e := c.e
	if rank < 0 || rank >= e.size || rank == e.rank {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.failPeer(e.chans.get(rank), fmt.Errorf("pml: %w", wrapLost(err)))
}

// wrapLost makes err wrap core.ErrPeerLost.
func wrapLost(err error) error {
	if err == nil {
		return core.ErrPeerLost
	}
	return err
}

// Failed records that an operation of a layer above failed on this rank
// in a way that may leave its peers waiting on it — a collective whose
// ranks called it with arguments that do not fit (coll's ErrMismatch) —
// as the PML records its own truncated receives and stalls. The first
// failure is kept. Close, after one, meets the other ranks only briefly
// (FailedFinalize) and fails if they do not come: they may be waiting for
// a message this rank will not send.
func (c *Comm) Failed(err error) {
	if err != nil {
		c.e.fail(err)
	}
}

// fail records err as this rank's failure, if it is the first, and
// returns it (off the data path: an error's branch).
func (e *engine) fail(err error) error {
	e.failed.CompareAndSwap(nil, &err)
	return err
}

// FailedFinalize bounds Close's finalize after this rank failed (a
// truncated receive, a stall, Failed; a lost peer or an abort skips the
// barrier altogether): a program that returns its error, its
// communicator closed by a defer, meets peers that may be blocked on a
// message it will never send; they do not come, and Close gives up after
// this, not after Options.FinalizeTimeout.
const FailedFinalize = 2 * time.Second
