// Package pmi is a core.Bootstrap over the PMI-2 and PMI-1 wire
// protocols, spoken in pure Go on the socket an engine hands its ranks
// (PMI_FD, or PMI_PORT): `srun --mpi=pmi2` and MPICH's `mpiexec.hydra`
// start gobtl programs with no C library.
//
// The protocols are small and textual. A rank opens with PMI-1's
//
//	cmd=init pmi_version=2 pmi_subversion=0
//
// and, if the engine agrees to version 2, goes on with length-prefixed
// commands ("    30cmd=fullinit;pmirank=3;...;"): fullinit, job-getid,
// info-getjobattr (PMI_process_mapping: the ranks of each node),
// kvs-put, kvs-fence, kvs-get, abort and finalize. An engine that refuses
// version 2 gets PMI-1's newline-terminated commands instead: get_maxes,
// get_my_kvsname, put, barrier_in, get, abort, finalize.
//
// PMI's key-value space is flat (one per job), write-once, and bounds
// keys and values (64 and 1024 bytes in Slurm and hydra; PMI-1 also
// bounds the whole line). gobtl's keys are per rank and its values are
// binary blobs of any length, so the client does not map them one to one:
// at each Fence a rank publishes one blob holding everything it put since
// the last fence, base64url-encoded and split across keys named
// gobtl-<rank>-<epoch>[-<chunk>], the first chunk carrying the count. A
// Get reads a peer's blobs of the epochs not yet read, once, and answers
// from them; every rank publishes a blob at every fence, empty or not, so
// that no read ever asks for a key that does not exist (hydra's PMI-2
// kvs-get waits for such a key instead of failing).
//
// Locality comes from PMI_process_mapping ("(vector,(0,2,2))": starting at
// node 0, 2 nodes of 2 ranks each), else from an exchange of host names
// through the key-value space.
//
// Abort sends PMI's abort (with isworld=TRUE, which Slurm needs to kill
// the step); hydra 4.0 does not know PMI-2's abort but ends the job on it
// all the same, complaining of an unrecognized command. GOBTL_PMI_VERSION=1
// or 2 forces a protocol. With PMI_PORT instead of PMI_FD the client
// connects over TCP and speaks the same protocol (no PMI-1 initack).
package pmi
