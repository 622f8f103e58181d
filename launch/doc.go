// Package launch starts and supervises the ranks of a job on this host:
// the engine behind `gobtl run`, in the role of Open MPI's mpirun with its
// embedded PMIx server.
//
// Run spawns N processes with the environment package boot reads (rank,
// size, job id, bootstrap socket, stack file), serves the key-value
// exchange with a fence over a unix socket (Server), forwards the ranks'
// output, and watches them. The first rank that fails — a non-zero exit,
// a signal, an explicit abort through the bootstrap, or an exit with
// status 0 by a rank that joined the job and never finalized (its Close,
// boot.OpFinalize: mpirun's "exiting improperly") — decides the job's
// exit status; the others get SIGTERM and, after a grace period, SIGKILL,
// so the job is gone within about two seconds. Before that, the moment it
// reaps a rank that did not finalize, the launcher tells every other rank
// (boot.OpLost), whose PML fails its channel to it: a rank waiting on it
// learns at once, where its transport would notice late or, for a peer it
// never connected to, never. An interrupt (ctx canceled)
// or the timeout stops the job the same way. Afterwards the launcher
// removes the job's shared-memory files (boot.ShmPrefix) that crashed
// ranks could not.
//
// A launcher killed outright cannot clean up, so a running job keeps
// nothing in the file system to clean: the boot directory goes after the
// last rank's hello, and the transports unlink their files after the
// mapping fence (clean.go). What start-up leaves carries its owner's pid;
// the next launcher removes it, and Clean (`gobtl clean`) the rest.
//
// Placement (place.go, mpirun's --map-by and --bind-to): by default each
// rank is bound to a core of its own when the ranks fit the cores the
// launcher was given, and none is bound when they do not (the launcher
// says so). A rank is bound before it execs — its thread's affinity is
// set for the fork — so its whole runtime, and the GOMAXPROCS Go derives
// from the affinity, starts bound. Package internal/topo reads the
// topology and makes the plan.
//
// The launcher shares the machine's cores with the ranks, so it never
// polls: every wait is a blocking read, a process wait or a timer.
package launch
