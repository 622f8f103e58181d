// Package shm is a collective component for the ranks of one node — a
// coll.NodeComponent, as Open MPI's coll/sm, coll/xhc and HAN's
// intra-node level sit beside coll/tuned: the ranks that share a node
// meet in one segment of shared memory per communicator, and a
// communicator that spans nodes runs its network part between the
// nodes' leaders with coll's point-to-point algorithms.
//
// # The segment
//
// The first collective that chooses the component opens it (Open): the
// ranks exchange labels of their nodes, split the communicator into one
// per node and one of the leaders (the lowest rank of each node), and
// each node's leader creates a file in /dev/shm with internal/jobfile —
// exclusively, without following links, mode 0600, checked with fstat,
// named with 64 random bits, its pages reserved with fallocate so that a
// full /dev/shm is an error here and not a SIGBUS later — and sends its
// name to the others
// over the node's communicator. Once every rank of the communicator has
// said that it mapped its node's, the leader unlinks it (as btl/sm
// does): a job killed after that leaves nothing in /dev/shm. A node that
// failed makes every rank fail the open alike, and the communicator keeps
// the point-to-point algorithms. Ranks that are goroutines of one
// process map the same file too: the component works the same for them.
//
// # Flags and chunks
//
// The barrier and vectors up to Options.Small (4 KiB) go through slots —
// a cache-line flag holding the collective's sequence number, followed
// by the data — fanned in and out over a tree of radix 4 whose subtrees
// are contiguous ranges of ranks, so that a reduction combines in rank
// order (small.go, tree.go). Larger broadcasts, reductions and
// allgathers go through chunks copied in and out in a pipeline, every
// rank copying at once (chunk.go, which says why this beats CMA). Every
// flag and counter is a line written by one rank only.
//
// # Waiting
//
// A rank polls its flags Options.Spin times, then hands the collective
// to the PML as an operation (pml.Comm.Start) and waits for it there
// (WaitRound): the PML's back-off yields and sleeps so that ranks that
// share CPUs do not starve each other, its progress notices a lost
// member (btl/sm's pidfds: every rank of a node says hello to every
// other when the segment is set up, so each watches each), and a member
// lost ends the wait with core.ErrPeerLost. A rank whose collective
// fails sets the segment's broken word, which every wait of the node
// reads, so that the ranks waiting on it fail too, in bounded time (it
// also fails every collective that begins after it: the communicator is
// done for). Ranks that pass different lengths fail with
// coll.ErrMismatch: in the same slots or chunks they compare them, and
// ranks whose lengths fall on both sides of Options.Small, which wait on
// different lines, look while they wait for the other path's mark
// (straddle.go, which says what a rank that only writes cannot be
// told). Ranks of a broadcast or a reduce that name different roots
// fail with coll.ErrMismatch too: the root rides in the slot's length
// word and beside a chunk collective's, and a rank that waits looks for
// a rank that named another root or left without writing what it waits
// for (roots.go, which says who cannot be told). The PML's waits are
// on the whole communicator, so that a member lost on another node ends
// a wait on this one.
//
// A context that ends returns its error and leaves the collective
// running in the PML; the next one waits for it first, whatever its own
// context. A collective over several nodes runs its stages — the
// node's, the leaders', the node's — to the end whatever its context:
// the other ranks wait for each of them.
//
// # Results
//
// A reduction combines in rank order — the serial fold, on every rank
// alike — on one node: the small ones over the tree, the large ones by
// shares of each chunk (x0∘x1∘…∘xn−1). Across nodes it combines each
// node's part and then the nodes', which is rank order when the nodes
// hold contiguous ranges of ranks; an operation that does not commute
// over nodes that do not is left to the point-to-point algorithms
// (coll.ErrUnserved), as is an allgather over nodes of unequal or
// interleaved ranges.
package shm
