package coll

import (
	"fmt"
	"math/bits"
	"strings"
)

// Kind is a collective operation, as the decision and the stack file's
// coll block name it.
type Kind uint8

// The collectives with a choice of algorithm.
const (
	KindBarrier Kind = iota
	KindBcast
	KindReduce
	KindAllreduce
	KindAllgather
	KindAlltoall
	KindGather
	KindScatter
	KindReduceScatter
	KindScan
	numKinds
)

// Alg is an algorithm.
type Alg uint8

// The algorithms (Open MPI's coll/base names where it has them).
const (
	// Auto lets the decision table choose.
	Auto Alg = iota
	// Dissemination: in round k every rank signals rank+2^k and waits
	// for rank−2^k; ⌈log2 n⌉ rounds for any n.
	Dissemination
	// Binomial tree rooted at the root (relative ranks), whole message.
	Binomial
	// Binary: a binary tree (children 2r+1, 2r+2 of relative rank r)
	// pipelined in segments.
	Binary
	// Pipeline: a chain root → root+1 → … pipelined in segments.
	Pipeline
	// ScatterAllgather: the root scatters the message in n blocks over a
	// binomial tree, then a ring allgathers them (van de Geijn).
	ScatterAllgather
	// RecursiveDoubling: log2 exchanges with rank XOR 2^k of the whole
	// vector (allreduce) or of doubling windows (allgather); a job that is
	// not a power of two folds its extra ranks in first and out last.
	RecursiveDoubling
	// Rabenseifner: reduce-scatter by recursive halving, then allgather by
	// recursive doubling: 2·log2 n steps moving 2(n−1)/n of the vector.
	Rabenseifner
	// Ring: n−1 steps around the ring (reduce-scatter then allgather for
	// allreduce): bandwidth-optimal, latency linear in n.
	Ring
	// ReduceBcast: a reduce to rank 0 followed by a broadcast (Open MPI's
	// nonoverlapping).
	ReduceBcast
	// Bruck: ⌈log2 n⌉ steps sending to rank−2^k, then a local rotation;
	// any n.
	Bruck
	// Linear: every message posted at once (alltoall, bcast, barrier; allreduce:
	// every rank's vector to every rank, folded in rank order in one
	// round), or the root talks to every rank in turn (gather, scatter).
	Linear
	// Pairwise: in step i send to rank+i and receive from rank−i.
	Pairwise
	// RecursiveHalving: reduce-scatter in log2 n halving exchanges (a
	// power-of-two job).
	RecursiveHalving
	// ReduceScatterv: a reduce to rank 0, then a scatter.
	ReduceScatterv
	// Direct: allreduce as a reduce-scatter and an allgather of one round
	// each — every rank sends block j of its vector straight to rank j,
	// which folds the n blocks, then sends the result to every rank: the
	// bytes Rabenseifner moves, in 2 rounds instead of 2·log2 n.
	Direct
	// Shm: the node component (Tuning.Node, package coll/shm): flags and
	// buffers in memory the ranks of a node share, and the network part
	// between the nodes' leaders.
	Shm
	numAlgs
)

var algNames = [numAlgs]string{
	Auto: "auto", Dissemination: "dissemination", Binomial: "binomial", Binary: "binary",
	Pipeline: "pipeline", ScatterAllgather: "scatter_allgather", RecursiveDoubling: "recursive_doubling",
	Rabenseifner: "rabenseifner", Ring: "ring", ReduceBcast: "reduce_bcast", Bruck: "bruck",
	Linear: "linear", Pairwise: "pairwise", RecursiveHalving: "recursive_halving", ReduceScatterv: "reduce_scatter",
	Direct: "direct", Shm: "shm",
}

func (a Alg) String() string {
	if a < numAlgs {
		return algNames[a]
	}
	return fmt.Sprintf("alg(%d)", a)
}

// kind describes one collective: its name in the coll block and the
// algorithms it can run.
type kind struct {
	name string
	algs []Alg
}

var kinds = [numKinds]kind{
	KindBarrier:       {"barrier", []Alg{Dissemination, Linear, Shm}},
	KindBcast:         {"bcast", []Alg{Binomial, Binary, Pipeline, ScatterAllgather, Linear, Shm}},
	KindReduce:        {"reduce", []Alg{Binomial, Binary, Shm}},
	KindAllreduce:     {"allreduce", []Alg{RecursiveDoubling, Rabenseifner, Ring, ReduceBcast, Linear, Direct, Shm}},
	KindAllgather:     {"allgather", []Alg{Bruck, RecursiveDoubling, Ring, Linear, Shm}},
	KindAlltoall:      {"alltoall", []Alg{Linear, Pairwise}},
	KindGather:        {"gather", []Alg{Binomial, Linear}},
	KindScatter:       {"scatter", []Alg{Binomial, Linear}},
	KindReduceScatter: {"reduce_scatter", []Alg{Ring, RecursiveHalving, ReduceScatterv}},
	KindScan:          {"scan", []Alg{RecursiveDoubling}},
}

func (k Kind) String() string {
	if k < numKinds {
		return kinds[k].name
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Kinds lists the collectives the coll block can tune, by name, each with
// its algorithms (without "auto").
func Kinds() map[string][]string {
	out := map[string][]string{}
	for _, k := range kinds {
		for _, a := range k.algs {
			out[k.name] = append(out[k.name], a.String())
		}
	}
	return out
}

// Tuning overrides the decision table: a forced algorithm per collective
// and the segment size of the pipelined ones. The zero value follows the
// table. A forced algorithm that cannot serve a call (a ring allreduce of
// an operation that does not commute, recursive doubling allgather on a
// job that is not a power of two) falls back to one that can, as Open
// MPI's do.
type Tuning struct {
	Force [numKinds]Alg
	// Segment is the size of a pipeline segment in bytes; 0: the table's.
	Segment int
	// Machine is where the job's ranks run, which picks the table. Every
	// rank of the job must be given the same (gobtl.Init agrees on it
	// through the bootstrap): ranks that decide differently run different
	// algorithms and never meet.
	Machine Machine
	// Node is the component that serves collectives through the memory
	// the ranks of a node share (package coll/shm); nil: none, and "shm"
	// falls back to the table. The table chooses it by itself where the
	// ranks own their cores (Machine.OwnCore, nodeRule).
	Node NodeComponent
}

// Machine is what the decision knows of where the job's ranks run. The
// zero value — nothing known — is a job whose ranks share cores, the
// case the first table was measured for.
type Machine struct {
	// OwnCore says every rank of the job has a core to itself — bound to
	// one, or its node's ranks fit its node's cores — on every node. The
	// ranks then run whenever they have work, and the decision follows
	// Open MPI's for ranks that do (ownTable); otherwise a round is a
	// wait for ranks that may not be running (table).
	OwnCore bool
	// Nodes is the number of nodes the job spans (0: one) and PerNode the
	// most ranks on one of them (0: unknown). A communicator of a Split
	// decides with its job's: a Machine is the job's, the same everywhere.
	Nodes, PerNode int
}

// oneNode reports whether the job runs on one node: its messages are
// copies between processes (single-copy reads by CMA), not a link's.
func (m Machine) oneNode() bool { return m.Nodes <= 1 }

// Set forces the algorithm called alg ("auto": the table's) for the
// collective called kind, both as the coll block names them.
func (t *Tuning) Set(kindName, alg string) error {
	for k, d := range kinds {
		if d.name != kindName {
			continue
		}
		if alg == "auto" {
			t.Force[k] = Auto
			return nil
		}
		for _, a := range d.algs {
			if a.String() == alg {
				t.Force[k] = a
				return nil
			}
		}
		names := make([]string, len(d.algs))
		for i, a := range d.algs {
			names[i] = a.String()
		}
		return fmt.Errorf("coll: %s has no algorithm %q (have auto, %s)", kindName, alg, strings.Join(names, ", "))
	}
	return fmt.Errorf("coll: no collective %q to tune", kindName)
}

// A rule of the decision table: for communicators of fewer than ranks
// ranks (0: any) — of a power of two of them if pow2 — and messages of
// fewer than bytes bytes (0: any), use alg with segments of seg bytes. The
// first rule that matches wins.
type rule struct {
	ranks, bytes int
	pow2         bool
	// node restricts the rule to jobs on one node.
	node bool
	alg  Alg
	seg  int
}

// The decision table, in the manner of Open MPI's coll/tuned fixed
// decision (ompi/mca/coll/tuned/coll_tuned_decision_fixed.c, 4.1): the
// algorithm by communicator size and message size. Open MPI's switch
// points come from clusters; these follow its shape — recursive doubling
// for small allreduces, Rabenseifner above a few KiB, recursive doubling
// allgather on powers of two, binomial trees for small broadcasts and
// pipelines for large ones — with the thresholds measured on one node
// over shared memory (bench/compare-ompi.sh), where a message costs a
// copy rather than a wire and the ranks often outnumber the cores — and,
// for small allreduces, one round where Open MPI takes log2 n. The
// message size is the whole vector for bcast, reduce and allreduce, one
// rank's block for the others.
var table = [numKinds][]rule{
	KindBarrier: {
		// One round up to 16 ranks, as the small allreduce (Open MPI's
		// linear barrier from 4 to 7 ranks takes two: in to rank 0, out
		// from it). On 2 CPUs, alternating (load 8-19), context switches
		// per barrier: 8 ranks 16-69 against dissemination's 33-221, 16
		// ranks 76-108 against 181-320; 4 ranks 14-20 against 12-19, a
		// draw. Open MPI's fan in to rank 0 and out again moves half the
		// messages but waits twice: nearer a quiet machine (see allreduce)
		// a 4-rank barrier took 11.9 µs that way against 10.8 linear
		// (Open MPI 10.0), and the osu allreduce it brackets was no faster
		// (9.4 and 9.4 µs in two runs against 10.2 and 8.9).
		{ranks: 17, alg: Linear},
		{alg: Dissemination},
	},
	KindBcast: {
		{bytes: 16 << 10, alg: Binomial},
		// Rendezvous sizes below 32 ranks: straight from the root, as Open
		// MPI does from 8 to 15 ranks. Every rank waits once, on the root
		// alone; a tree makes a rank wait on a parent that, with more ranks
		// than cores, may not be running, once per level (⌈log2 n⌉ rounds),
		// a segmented pipeline once per segment and level, scatter+allgather
		// n−1+⌈log2 n⌉ times. On one node the copies are the cost, not a
		// link: with a single-copy rendezvous the receivers read the root's
		// buffer in parallel, n−1 copies in all; the tree makes as many,
		// scatter+allgather twice as many. With the copy pipeline the root
		// copies every message in, and the tree measured no better on
		// 2 cores at 8 and 16 ranks.
		{ranks: 32, alg: Linear},
		{bytes: 512 << 10, alg: Binary, seg: 32 << 10},
		{alg: ScatterAllgather},
	},
	KindReduce: {
		{bytes: 64 << 10, alg: Binomial},
		{alg: Binary, seg: 64 << 10},
	},
	KindAllreduce: {
		// A vector of a few hundred words on up to 16 ranks: every vector
		// to every rank in one round, where Open MPI recurses (log2 n
		// rounds). With more ranks than cores each round is a wait for
		// ranks that are not running; 8 B on 2 CPUs, alternating with
		// Open MPI (load 8-13): 4 ranks 18-20 µs against recursive
		// doubling's 20-22 and Open MPI's 34-44; 8 ranks 42-50 against
		// 55-59 and 38-48; 16 ranks 159-268 against 194-571 and
		// 171-827; 1 KiB on 8 ranks 47-165 against 239-355, with a third
		// to a half of the context switches. Nearer a quiet machine (the
		// job in a session of its own whose autogroup has nice -20, load
		// 9-25 outside it; osu timing, medians of 5-15 alternating runs),
		// 4 ranks 8 B: linear 14.4 µs, recursive doubling 16.5, reduce
		// + bcast 19.0, Open MPI 10.6; 8 ranks: linear 32, recursive
		// doubling 44, Open MPI 26. At a load of 3 (plain runs, 9 each):
		// linear 8.8, recursive doubling 10.4 (10.7 with the
		// dissemination barrier), reduce + bcast 15.6, Open MPI 7.1; the
		// dissemination barrier under linear: 10.5. Linear also makes
		// the fewest context switches (1.4-1.6 per rank and call, Open
		// MPI 2.2-2.4): what is left of the gap is CPU per switch and per
		// message, not waits.
		{ranks: 17, bytes: 2 << 10, alg: Linear},
		{bytes: 8 << 10, alg: RecursiveDoubling},
		// Rabenseifner's steps are exchanges, which sm on a node with more
		// ranks than CPUs pipelines up to 512 KiB: fast while both ranks of
		// a pair are on a CPU, slow while they share one. The direct
		// allreduce (2 rounds, the same bytes, one-way messages by CMA from
		// both ends, whichever rank runs) was measured against it at 1 MiB
		// on 4 ranks, 2 CPUs, under a load of 15-25, 6+8+8+6 alternating
		// pairs: the median of mean latencies 2322 / 13179 / 10490 / 8559
		// µs against Rabenseifner's 4816 / 8971 / 6720 / 4166; the fastest
		// per-iteration medians ~1800 µs against Rabenseifner's ~1000 — so
		// Rabenseifner stays. The direct one with its messages as exchanges
		// (pipelined) did no better (7808 in the last batch). "direct" in
		// the coll block chooses it.
		{alg: Rabenseifner},
	},
	KindAllgather: {
		{ranks: 3, alg: Ring},
		{bytes: 64 << 10, alg: RecursiveDoubling}, // Bruck when not a power of two
		// Large blocks on 4 ranks: every block to every rank in one round
		// (Open MPI: recursive doubling). Recursive doubling's second step
		// sends what its first brought, so a rank whose partner is off its
		// CPU waits twice; the linear allgather's messages can all move as
		// soon as both ends have called, by CMA from both ends, whichever
		// of the two runs. 4 ranks on 2 CPUs, 1 MiB, alternating with
		// recursive doubling under a load of 19-25: the linear allgather
		// was faster in 8 of 10 pairs (median of mean latencies 5104 µs
		// against 8678, of per-iteration medians 2916 against 8056), in 5
		// of 8 in another batch (6384 against 6561), 6 of 8 in a third
		// (3792 against 4896) and 4 of 8 in a fourth (8886 against 9412),
		// 23 of 34 in all — where the same code against itself (allreduce)
		// gave medians of 3084 and 4674; the CPU time per call (the
		// 4 ranks' task-clock) was within this load's noise, 5.7-7.9 ms
		// against 3.6-11.8, with the same 12 MiB read by CMA (44 % of it
		// written by the senders), in 12 messages instead of 8. 256 KiB:
		// 770 µs against 876, 64 KiB: 227 against 271 (4 pairs each). At 8 ranks
		// one linear run of three took 219 ms (the others 13-18), so larger
		// jobs keep recursive doubling.
		{ranks: 5, pow2: true, alg: Linear}, // 3 ranks (unmeasured) keep the ring
		// Large blocks: Open MPI's choice below 32 ranks. Recursive doubling
		// moves the bytes the ring does in log2 n rounds instead of n−1, each
		// a wait on a peer that, with more ranks than cores, may not be
		// running. Bruck's final rotation would copy every block once more,
		// so the ring serves the other job sizes.
		{ranks: 32, pow2: true, alg: RecursiveDoubling},
		{alg: Ring},
	},
	KindAlltoall: {
		{bytes: 8 << 10, alg: Linear},
		{alg: Pairwise},
	},
	KindGather:        {{bytes: 4 << 10, alg: Binomial}, {alg: Linear}},
	KindScatter:       {{bytes: 4 << 10, alg: Binomial}, {alg: Linear}},
	KindReduceScatter: {{bytes: 8 << 10, alg: RecursiveHalving}, {alg: Ring}},
	KindScan:          {{alg: RecursiveDoubling}},
}

// ownTable is the decision for ranks that each own a core: Open MPI's
// coll/tuned fixed rules (coll_tuned_decision_fixed.c, 4.1 and later, for
// commutative operations) in this layer's algorithms, where table's one
// round for many ranks' waits is no gain — every rank runs — and its
// messages cost n−1 sends and polls on every rank. Measured on a 16-core
// Xeon with 16 ranks bound to cores (issue 29): table's linear allreduce
// of 8 B had a median of 7 µs where recursive doubling and the
// dissemination barrier had 2.8–3.3 µs (Open MPI's mean 3.75–4.76); its
// linear broadcast of 1 MiB took 606 µs where Open MPI's scatter +
// allgather took 365. What table measured on 2 cores and Open MPI agrees
// with stays: the linear broadcast of large messages below 16 ranks (Open
// MPI's from 8 KiB at 4–7 ranks, from 32 KiB at 8–15; 0.73× Open MPI's
// time at 4 ranks), recursive doubling allgather, and the linear
// allgather of large blocks at 4 ranks, which reads them by CMA and so
// needs one node (0.96× at 4 ranks).
var ownTable = func() [numKinds][]rule {
	t := table
	// Open MPI: recursive doubling to 63 ranks but for a linear barrier
	// from 4 to 7 (in to rank 0 and out again, two rounds), Bruck above.
	// Dissemination takes recursive doubling's ⌈log2 n⌉ rounds for any n;
	// this layer's linear barrier is not Open MPI's but every rank to
	// every rank, n−1 messages and polls a rank, and was 1.19× Open MPI's
	// time at 4 ranks on 16 cores.
	t[KindBarrier] = []rule{{alg: Dissemination}}
	t[KindAllreduce] = []rule{
		// Open MPI: recursive doubling below 8 KiB up to 15 ranks, 4 KiB
		// from 16 to 31, then Rabenseifner (ring below 8 B on 2–3 ranks,
		// segmented ring below 64 B from 16: one round each way there).
		{ranks: 16, bytes: 8 << 10, alg: RecursiveDoubling},
		{bytes: 4 << 10, alg: RecursiveDoubling},
		{alg: Rabenseifner},
	}
	t[KindBcast] = []rule{
		{bytes: 16 << 10, alg: Binomial},
		{ranks: 16, alg: Linear},
		// Open MPI from 16 to 31 ranks: binomial below 1 MiB, scatter +
		// allgather from 1 MiB.
		{ranks: 32, bytes: 1 << 20, alg: Binomial},
		{ranks: 32, alg: ScatterAllgather},
		{bytes: 512 << 10, alg: Binary, seg: 32 << 10},
		{alg: ScatterAllgather},
	}
	t[KindAllgather] = []rule{
		{ranks: 3, alg: Ring},
		{bytes: 64 << 10, alg: RecursiveDoubling},
		{ranks: 5, pow2: true, node: true, alg: Linear},
		{ranks: 32, pow2: true, alg: RecursiveDoubling},
		{alg: Ring},
	}
	return t
}()

// decide returns the algorithm and segment size for a collective of kind
// over n ranks moving bytes, honouring the tuning: the rules of ownTable
// when the ranks own their cores, of table when they share them. It is a
// point-to-point algorithm: a collective forced to "shm" that the node
// component does not take (useNode) gets the table's.
func (t *Tuning) decide(k Kind, n, bytes int) (Alg, int) {
	alg, seg := Auto, 0
	rules, one := table[k], t.Machine.oneNode()
	if t.Machine.OwnCore {
		rules = ownTable[k]
	}
	for _, r := range rules {
		if (r.ranks == 0 || n < r.ranks) && (!r.pow2 || pow2(n)) && (r.bytes == 0 || bytes < r.bytes) && (!r.node || one) {
			alg, seg = r.alg, r.seg
			break
		}
	}
	if f := t.Force[k]; f != Auto && f != Shm {
		alg = f
	}
	if t.Segment > 0 {
		seg = t.Segment
	}
	if seg <= 0 {
		seg = 64 << 10
	}
	return alg, seg
}

// pow2 reports whether n is a power of two.
func pow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// floorPow2 is the largest power of two not above n (n ≥ 1).
func floorPow2(n int) int { return 1 << (bits.Len(uint(n)) - 1) }
