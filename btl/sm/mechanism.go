package sm

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// MechParams is the schema of a mechanism block inside btl "sm": one rule
// of the table by which the PML moves rendezvous data (core.MechRule).
var MechParams = []core.Param{
	{Name: "max", Type: core.ParamSize, Default: "0",
		Doc: "largest message, in user bytes, of this range; 0 (only the last block): every larger message"},
	{Name: "single_copy_depth", Type: core.ParamInt, Default: "0", Min: "-1", Max: "65536",
		Doc: "CMA while at most this many other rendezvous sends to the same peer are in flight (0: only a message alone), " +
			"else the copy pipeline; -1: always the copy pipeline"},
	{Name: "fragment", Type: core.ParamSize, Default: "0", Max: "64MiB",
		Doc: "the copy pipeline's fragment payload, at most max_send_size; 0: max_send_size"},
	{Name: "depth", Type: core.ParamInt, Default: "0", Min: "0", Max: "65536",
		Doc: "the copy pipeline's fragments to the peer in flight at most before the sender waits for the receiver to copy out; 0: as many as there are"},
}

// defaultMech is sm's table when the stack file gives none. On a 2-core
// AMD EPYC (Zen 3, family 25 model 1) KVM guest:
//
//   - process_vm_readv moves about 11 GB/s at every size (64 KiB in
//     7 us, 1 MiB in 92 us, 4 MiB in 406 us; half of it pinning the
//     peer's pages page by page), a cached memmove 26-50 GB/s;
//   - the host moves the guest's two vCPUs, for seconds to minutes at a
//     time, between cores that share a last-level cache (a cache line's
//     round trip 89-100 ns, 1 MiB of lines the other core wrote read in
//     28-37 us) and cores that do not (210-240 ns, 67-85 us). The copy
//     pipeline's second copy reads lines the other core just wrote, so a
//     message alone of 1 MiB takes 42-60 us in the first state and
//     150-250 us in the second (the bimodal latency of the compare
//     runs); a CMA read takes the same 98-123 us in both, and a CMA read
//     from both ends (coop.go: the sender writes chunks from the front
//     while the receiver reads from the back) 62-92 us, the sender
//     writing 38-50 % of it, and needs the sender only to go faster;
//   - over 1,209 alternating pairs of ping-pong runs (300 iterations
//     each, idle machine, both states sampled) the pipeline's median beat
//     CMA from both ends at every size: 64 KiB 12.0 us against 18.3, 256 KiB 17.7 against
//     26.6, 1 MiB 50.3 against 86.9 (means 85 against 89; the pipeline's
//     90th percentile 223 against 108, its runs in the second state);
//   - up to 16 KiB a fragment or two cost less than CMA's system call;
//   - with osu bw's window of 64 messages in flight the pipeline's best
//     windows carried 17-25 GB/s at 64 KiB and 4 MiB, CMA from both ends
//     12-16 GB/s: there both processes copy at once anyway;
//   - but in a third state, or under the load of other jobs, the
//     pipeline fell apart where CMA did not (5 alternating runs, both
//     main's binary and this one): osu bw 4 MiB 2.4-2.5 GB/s against
//     13-14 by CMA from both ends and 10-11 by a CMA read alone (Open
//     MPI vader's single copy), 1 MiB 2.4 against 13.4; in that state
//     CMA from both ends led at 64 KiB too (bw 15.8 GB/s against 10.1,
//     latency 7.7 us against 13.8).
//
// And on a quiet 16-core Xeon (issue 29: one core copies 26.9 GB/s, a
// process_vm_readv 12 GB/s, a line crosses between cores in 180 ns) the
// pipeline lost to vader's single CMA copy where this VM's shared-cache
// state had it ahead: latency 1 MiB 111-128 us against 67-110, bandwidth
// 4 MiB 11.7 GB/s against 13.9-14.1, while at 64 KiB and 1 MiB bandwidth
// it was even or ahead (0.91-1.13x). The copy split between the two
// processes — half each, both by CMA at once — is the one mechanism
// that is not behind a single copy anywhere: here 1 MiB took 46-58 us
// (median) against 105-117 for the read alone, the sender writing 50 %.
// So the pipeline carries messages up to 512 KiB, alone or not, and
// above that every message is read from both ends, whatever is in flight.
//
// CMA stays the mechanism of a node with more ranks than CPUs
// (oversubscribedMech), where a pipeline's partner is often off its CPU,
// and of any stack whose mechanism blocks ask for it.
//
// The pipeline's fragments are the module's max_send_size, 64 KiB, in
// every range (fragment = 0): the PML cuts a medium message into
// power-of-two chunks (32 KiB: a 64 KiB message in two frames), a long
// one into whole fragments (17 frames per MiB, the last 1 KiB). Per
// message, both ranks in one goroutine, callgrind counts the instructions
// besides the two copies (bench BenchmarkStackPipeline): with 32 KiB
// fragments 5,692 at 64 KiB and 39,726 at 1 MiB; with 64 KiB 3,870 and
// 21,525; with 128 KiB 2,813 and 13,982 — about 1,100 instructions a
// fragment, beside two copies of about 1 us each at 32 KiB. 128 KiB would
// double what the receiver waits for before it can start copying out, and
// the segment (or halve its fragments). The default segment keeps the 2
// MiB of fragments it had with 32 KiB ones — 32 of 64 KiB: every rank
// maps every local peer's segment populated, and 64 of them (4 MiB) took
// twice the start-up CPU time (4 ranks in one process opening and
// connecting: 35-40 ms against 18-23 ms). No depth bound (depth = 0):
// the free fragments are reused last in, first out, so while the
// receiver keeps up the sender rewrites the few it just took back, and
// the set in use stays small without one.
var defaultMech = core.MechTable{
	{Max: 512 << 10, RDMADepth: core.NoRDMA},
	{RDMADepth: 65536},
}

// oversubscribedMech is sm's default table on a node that runs more of
// the job's ranks than it has CPUs. The copy pipeline needs sender and
// receiver running at once, which there they seldom are; a CMA read
// needs only the receiver. Allgather of 1 MiB at 16 ranks on 2 CPUs:
// 62-75 ms by the default table, 39-42 ms by CMA at every size and depth
// (3 alternations).
var oversubscribedMech = core.MechTable{
	{Max: 16 << 10, RDMADepth: core.NoRDMA},
	{RDMADepth: 65536},
}

// oversubscribedExchangeMech is the oversubscribed node's table for the
// messages of an exchange (core.Attrs.MechExchange): the receiver sends
// to the sender at the same time and each waits for the other's message,
// so the two run together whatever the mechanism — the reason for CMA
// above does not hold — and the pipeline's two memmoves cost less than
// one process_vm_readv (on this VM 43 µs a MiB each, 125 µs a MiB by CMA,
// pinning every page). Up to 512 KiB, a quarter of the segment's
// fragments, so that the sender's copy-in seldom waits for the receiver's
// copy-out (with 1 MiB the 1 MiB exchanges of a 4 MiB allreduce went no
// faster, within this machine's noise, and held half the fragments). Allreduce
// of 1 MiB at 4 ranks on 2 CPUs (Rabenseifner: exchanges of 512 and
// 256 KiB), 3 alternations at nice -15 (load 15): 567-1200 µs and
// 1457-2814 µs of CPU a call against 1225-1520 µs and 3067-3613 µs by CMA.
var oversubscribedExchangeMech = core.MechTable{
	{Max: 512 << 10, RDMADepth: core.NoRDMA},
	{RDMADepth: 65536},
}

// nodeMech is the tables a module uses, for messages one way and for
// exchanges: t and nil (t for both), or on a node with more ranks (local)
// than CPUs, when t is sm's default, the oversubscribed ones. cpus are
// the node's that its ranks share (topo.Binding.Node), not this rank's:
// a rank bound to a core runs on one.
func nodeMech(t core.MechTable, isDefault bool, local, cpus int) (mech, exchange core.MechTable) {
	if isDefault && local > cpus {
		return oversubscribedMech, oversubscribedExchangeMech
	}
	return t, nil
}

// mechTable is the table of the btl "sm" block p: its mechanism blocks,
// the legacy single_copy_min/max window when either is non-zero (no
// table: the PML reads Attrs.RDMAMin/RDMAMax), or sm's default. The
// window counts only when non-zero, not when merely set: `gobtl config
// show` spells out every default, and what it prints must load back to
// the same choice.
func mechTable(p core.Params, maxSend int) (core.MechTable, error) {
	blocks := p.Blocks("mechanism")
	window := p.Size("single_copy_min") != 0 || p.Size("single_copy_max") != 0
	switch {
	case len(blocks) == 0 && window:
		return nil, nil
	case len(blocks) == 0:
		return defaultMech, nil
	case window:
		return nil, fmt.Errorf("sm: single_copy_min/single_copy_max and mechanism blocks both given; the mechanism blocks say everything the window does (single_copy_depth = 65536 is CMA whatever is in flight)")
	}
	t := rules(blocks)
	if err := t.Validate(maxSend); err != nil {
		return nil, fmt.Errorf("sm: mechanism: %w", err)
	}
	return t, nil
}

// rules is the table of mechanism blocks.
func rules(blocks []core.Params) core.MechTable {
	t := make(core.MechTable, len(blocks))
	for i, b := range blocks {
		t[i] = core.MechRule{
			Max:       b.Size("max"),
			RDMADepth: b.Int("single_copy_depth"),
			Frag:      int(b.Size("fragment")),
			Depth:     b.Int("depth"),
		}
	}
	return t
}

// checkMech validates the mechanism blocks as a whole when the stack file
// loads (their order, the open-ended last one); the fragments against
// max_send_size wait for configFrom, which sees both.
func checkMech(v any) error { return rules(v.([]core.Params)).Validate(0) }
