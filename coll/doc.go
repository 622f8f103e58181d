// Package coll is gobtl's collective layer: barrier, broadcast, reduce,
// allreduce, reduce-scatter, scan, gather, scatter, allgather and
// alltoall, with Split and Dup, over the PML's point-to-point — a
// component of its own above the PML, as Open MPI's coll framework is
// (coll/base's algorithms, coll/tuned's decision by size), never inside
// it.
//
// # Algorithms and the decision
//
// Every collective has several algorithms, all correct for any number of
// ranks and any root: binomial, pipelined binary-tree and chain
// broadcast, linear (straight from the root) and scatter+allgather (van
// de Geijn) for large ones;
// binomial and pipelined binary-tree reduce; recursive doubling allreduce
// for small vectors, Rabenseifner's reduce-scatter+allgather, a direct
// one (every block to its owner and back, two rounds) or a ring for large
// ones, reduce+broadcast; Bruck, recursive doubling, ring and linear
// allgather; linear and pairwise alltoall(v); the dissemination barrier;
// binomial and linear gather and scatter; ring, recursive halving and
// reduce+scatter reduce-scatter; recursive doubling scan. A job that is
// not a power of two folds its extra ranks into the recursive algorithms
// and out again, as MPICH does. The choice by communicator size and
// message size is a table in tune.go, in the shape of Open MPI 4.1's
// coll_tuned_decision_fixed.c, one for ranks that each own a core and one
// for ranks that share cores (Machine, which the job agrees on at start);
// a stack file's coll block overrides it
// (`coll { allreduce = "ring" }`, see Tuning). The metric
// coll.<collective>.<algorithm> counts the calls of each.
//
// A node component (Tuning.Node, NodeComponent: package coll/shm) may
// serve the blocking barrier, broadcast, reduce, allreduce and allgather
// instead, as Open MPI's coll/sm, coll/xhc and HAN sit beside coll/tuned:
// flags and buffers in memory the ranks of a node share, and coll's own
// algorithms between the nodes' leaders. The algorithm "shm" names it; the
// table chooses it where the ranks own their cores (node.go).
//
// # Schedules
//
// An algorithm builds a schedule (libnbc's idea): sends, receives, local
// combines and copies, cut into rounds by wait marks, run by one executor
// that posts a round's messages and moves on when they complete. The
// blocking calls run it to the end, waiting each round with
// PML.WaitRound — the PML's fused receive path, and a failure when a
// member is lost; the non-blocking ones (Ibarrier, Ibcast, Ireduce,
// Iallreduce, Igather, Iscatter, Iallgather, Ialltoall) hand it to the
// PML as a request (PML.Start), which every wait and test of the job
// advances and the usual Wait/Test family completes. A round's eager
// sends go by PML.TrySend, with no request. A small linear allreduce or a
// barrier called again between the same buffers reruns the steps built
// for the last call. A
// collective's messages go on the communicator's collective context
// (Communicator.Collectives) with a tag of their own — the collective's place
// in the sequence every rank follows — so they never match point-to-point
// messages, nor those of another collective in flight. The sends of an
// exchange step — recursive halving and doubling in allreduce and
// reduce-scatter, where both ranks send and each waits for the other's
// message — go by PML.IsendExchange, which lets the transport move
// them as suits two processes that run together (shared memory with more
// ranks than cores copies them through its fragments instead of reading
// them by CMA). The one-round algorithms' messages (linear, direct) are
// plain sends: a rank that runs can move them while their peers do not.
// A Comm reuses the schedules and scratch buffers of finished
// collectives: a collective in steady state allocates nothing.
//
// # Reductions
//
// An Op combines vectors of fixed-size elements held as bytes; Sum, Prod,
// Min, Max, Band, Bor and Bxor build them for Go's number types (the root
// package's typed reductions use them). The local combine runs on whole
// blocks — half the vector in a large allreduce's first step — so its loop
// is the collective's arithmetic: the sums of floats and of 4- and 8-byte
// integers run vector kernels that give the plain loop's bits. The order in which the ranks'
// contributions are combined depends only on the job size, the vector
// length and the algorithm — never on timing — so a floating-point
// reduction gives the same bits from run to run, and on every rank:
// the linear allreduce folds the n vectors in rank order, x0∘x1∘…∘xn−1,
// and the direct one each block, on its owner, in that order;
// recursive doubling combines the halves lower rank first, as a balanced
// tree ((x0+x1)+(x2+x3))+…, the folded ranks of a job that is not a power
// of two first; Rabenseifner and the ring reduce each block on one rank,
// in the order of the exchanges, then copy it to the others; the trees
// combine a rank's own part first, then its children's in order. An
// operation that does not commute is combined in rank order throughout
// (the ring and Rabenseifner's, which cannot, give way to recursive
// doubling; reduce goes through rank 0).
//
// # Failures and cancellation
//
// A collective fails on this rank — every message it still waits for
// cancelled — when one of its messages fails (core.ErrPeerLost), when the
// PML reports any member of the communicator lost (a rank waiting on a
// live member that will never send, because it lost another, does not
// hang), and when the ranks called it with arguments that do not fit
// together: ErrMismatch, on every rank that takes part in it, never
// ErrTruncated on some. A collective's tag carries a signature of the
// arguments every rank passes alike (length, root, operation): the
// messages of ranks that disagree do not match, and a round that waits
// finds them, or another rank's notice, and fails (agree.go, which says
// what no rank can find without a message more). A blocking call whose
// context ends returns a *PendingError wrapping ctx.Err(): the collective
// goes on in the background, as its non-blocking form would, since the
// other ranks take part in it, and the error's request says when it is
// over — its buffers are in use until that request completes. A failed
// collective does not wait for the messages it had in flight that cannot
// be cancelled (a receive already matched, a send): they may still
// complete into or out of its buffers, which a program that goes on after
// the failure gives up.
//
// # The PML
//
// coll reaches the point-to-point layer through PML, an interface of its
// own — the fifteen calls a schedule makes — which package pml's *Comm
// implements; New takes the communicator's type as a parameter
// (Communicator) so that Split and Dup derive communicators of that type.
package coll
