package core

import (
	"context"
	"strings"
)

// Bootstrap is the job's out-of-band wire-up service, in the shape of PMIx:
// who am I, how many are we, and a key-value exchange made consistent by a
// fence. A launcher (gobtl run, mpirun, srun) or a test provides it.
type Bootstrap interface {
	// Rank is this process's rank in [0, Size).
	Rank() int
	// Size is the number of ranks in the job.
	Size() int
	// JobID names the job uniquely on this host (for segment names).
	JobID() string
	// Put publishes value under key for this rank. It is visible to the
	// other ranks after the next Fence.
	Put(key string, value []byte) error
	// Fence returns when every rank has called Fence, after which all Puts
	// made before it are visible.
	Fence(ctx context.Context) error
	// Get returns what rank published under key.
	Get(ctx context.Context, rank int, key string) ([]byte, error)
}

// ShmPrefix is the prefix of every file a job's components create under
// /dev/shm. Components name their segments ShmPrefix(job) + "<component>-..."
// so that the launcher can remove whatever a crashed job left behind; it
// lives here, beside JobID, because both sides must agree on it without
// a BTL importing the launcher.
func ShmPrefix(jobID string) string {
	return "gobtl-" + strings.ReplaceAll(jobID, "/", "_") + "-"
}

// PeerWatcher is implemented by bootstraps whose engine tells the ranks
// when one of them ends without finalizing — exits, however, before its
// communicator's Close, or dies — as `gobtl run`'s launcher does the
// moment it reaps the process, and a PMIx server through its
// process-termination events (PMIx_Register_event_handler). The engine
// learns of a dead rank at once; a transport only when it next talks to
// it, and never for a peer it has not connected to. PMI-1 and PMI-2 have
// no such notice: there the transports are all a rank has.
//
// OnPeerLost installs f, which the bootstrap calls from a goroutine of its
// own — not from Progress, unlike a Module's OnPeerLost — once for each
// rank so reported, with an error wrapping ErrPeerLost that says how the
// rank ended; notices that came before f was installed are delivered to
// it at once. The PML fails its channel to that rank.
type PeerWatcher interface {
	OnPeerLost(f func(rank int, err error))
}
