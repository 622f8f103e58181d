// Package pmix is a core.Bootstrap over OpenPMIx, the library through
// which Open MPI's mpirun (its orted or PRRTE) and Slurm's srun
// --mpi=pmix wire up the ranks they start: PMIx_Init, the job's size, this
// rank and the node of every rank, PMIx_Put/Commit/Fence with
// PMIX_COLLECT_DATA and PMIx_Get for the BTLs' address blobs, PMIx_Abort
// to end the job, PMIx_Finalize.
//
// The library is reached through cgo and built only with the build tag
// pmix (and cgo): `go build -tags pmix`, which needs libpmix-dev (Debian)
// and its pkg-config file; the Makefile builds gobtl and the examples
// that way. A program built without the tag still runs under `gobtl run`,
// srun --mpi=pmi2 and mpiexec.hydra; started under PMIx it stops at Init
// with ErrNotBuilt, saying how to rebuild it.
//
// Locality: each rank's node comes from PMIX_NODEID, else PMIX_HOSTNAME,
// as the engine registers them for every rank of the job; an engine that
// gives neither for other ranks leaves PMIX_LOCAL_PEERS, this node's
// ranks, from which the ranks elsewhere are each counted as a node of
// their own (what shares this node is exact; Nodes may overcount).
package pmix

import (
	"errors"
	"fmt"
)

// Environment variables a PMIx server sets in the ranks it starts.
const (
	EnvNamespace = "PMIX_NAMESPACE"
	EnvRank      = "PMIX_RANK"
)

// Present reports whether getenv (os.Getenv) shows a rank started by a
// PMIx server.
func Present(getenv func(string) string) bool {
	return getenv(EnvNamespace) != "" && getenv(EnvRank) != ""
}

// ErrNotBuilt reports a program started under PMIx but built without the
// pmix build tag.
var ErrNotBuilt = errors.New("built without PMIx support")

func notBuilt(ns string) error {
	return fmt.Errorf("pmix: this program was started by a PMIx engine (mpirun, or srun --mpi=pmix; %s=%s) but was %w: "+
		"rebuild it with `go build -tags pmix` (needs libpmix-dev and pkg-config) or with `make`, "+
		"or start it with srun --mpi=pmi2 or mpiexec.hydra, which need no library", EnvNamespace, ns, ErrNotBuilt)
}
