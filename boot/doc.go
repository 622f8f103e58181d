// Package boot is the client side of gobtl's job bootstrap: the
// core.Bootstrap a rank gets from the launcher or engine that started it.
// Open picks it from the environment, in gobtl.Init's order (Detect):
// `gobtl run` (this package's Client), a PMIx server — Open MPI's mpirun,
// srun --mpi=pmix — (package boot/pmix, build tag pmix), a PMI-2 or PMI-1
// server — srun --mpi=pmi2, mpiexec.hydra — (package boot/pmi), else none:
// a job of one rank. gobtl never grows a multi-host launcher of its own;
// jobs across hosts come from those engines.
//
// The shape is PMIx's: a rank knows its rank, the job's size and id, and
// shares small address blobs with the other ranks through a key-value store
// made consistent by a fence. Put only buffers locally; Fence sends what
// was put since the last fence to the launcher's server and returns, once
// every rank has fenced, with everything the other ranks put (a fence with
// data collection, PMIx_Fence with PMIX_COLLECT_DATA). Get is then a local
// lookup, so wire-up costs one round trip per fence however many keys the
// transports publish.
//
// FromEnv connects to the server named by the environment `gobtl run` sets
// (Env* below); its ranks share one host. Group builds an in-process
// bootstrap for tests that open several ranks in one process, and GroupOn
// one whose ranks it places on pretend nodes.
//
// The wire protocol, spoken over a unix stream socket, is one JSON object
// per line in each direction (Request, Reply); it is served by package
// launch. A rank ends its session with a finalize (Client.Finalize, from
// its communicator's Close); the launcher, unasked, tells the ranks of
// every rank that ended without one (OpLost, core.PeerWatcher), and a
// goroutine of the Client reads the session for those notices.
package boot

import (
	"syscall"

	"github.com/gobtl/gobtl/core"
)

// Environment variables set by the launcher for each rank.
const (
	// EnvRank is the rank of the process, in [0, EnvSize).
	EnvRank = "GOBTL_RANK"
	// EnvSize is the number of ranks in the job.
	EnvSize = "GOBTL_SIZE"
	// EnvJobID names the job on this host; shared-memory segments carry it.
	EnvJobID = "GOBTL_JOBID"
	// EnvBoot is the path of the launcher's bootstrap unix socket.
	EnvBoot = "GOBTL_BOOT"
	// EnvConfig is the stack file (HCL) the job was started with, if any.
	EnvConfig = "GOBTL_CONFIG"
	// EnvStderrTTY is "1" when the launcher's stderr is a terminal: a rank's
	// own stderr is a pipe to the launcher, which forwards it untouched, so
	// progress bars may still draw.
	EnvStderrTTY = "GOBTL_STDERR_TTY"
	// EnvReport is the file descriptor ("3") of the rank's line to the
	// launcher for state reports (mpirun's --report-state-on-timeout): a
	// rank that answers ReportSignal with a report of where it is blocked
	// and its pending requests, on its stderr, writes ReportReady on it
	// once, and ReportDone after each report. On a timeout or an
	// interrupt, `gobtl run` signals the ranks that said ready and waits
	// for their reports before it stops the job.
	EnvReport = "GOBTL_REPORT_FD"
)

// The state-report protocol of EnvReport: lines the rank writes, and the
// signal the launcher sends.
const (
	ReportReady  = "ready"
	ReportDone   = "reported"
	ReportSignal = syscall.SIGUSR1
)

// ShmPrefix is core.ShmPrefix: the prefix of the files a job's components
// create under /dev/shm, which the launcher removes after a crash.
func ShmPrefix(jobID string) string { return core.ShmPrefix(jobID) }
