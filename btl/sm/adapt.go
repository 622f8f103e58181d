package sm

import "github.com/gobtl/gobtl/core"

// Choosing the mechanism while the job runs (choose_mechanism).
//
// Which of CMA and the copy pipeline moves a large message alone faster
// depends on a state no start-up probe can follow: on the VM this was
// measured on, the host moves the two vCPUs between cores that share a
// last-level cache (1 MiB by the pipeline in 42-50 us, by CMA from both
// ends in 62-90) and cores that do not (pipeline 150-250 us, CMA ~90),
// and flips within seconds; other work on the node favours CMA too
// (pipeline medians of 0.2-9.7 ms under load against CMA's 0.09-0.25).
// So where a mechanism block lets a message go by CMA, choose_mechanism
// marks the rule core.MechRule.Choose: the sender offers CMA and the
// receiver's PML chooses, message by message, by what each mechanism
// delivered lately (pml/choose.go); a REPLY without keys tells the sender
// to pump.
//
// It is off by default (config.go, sm.hcl): on a quiet machine in the
// shared-cache state it took CMA for a large share of 1 MiB messages
// (pml.rdma_declined against rndv_sends) and the ping-pong's median was
// worse than the pipeline's, although under load it was far better. The
// receiver's time from the START to the last byte apparently favours CMA
// over what the ping-pong sees end to end; that is the next thing to find.

// chooseIn is table t with every rule that allows CMA at some depth left
// to the receiver's choice (core.MechRule.Choose). sm's default table,
// which never reads by CMA, gives way to chooseMech.
func chooseIn(t core.MechTable, isDefault bool) core.MechTable {
	if isDefault {
		return chooseMech
	}
	c := make(core.MechTable, len(t))
	for i, r := range t {
		r.Choose = r.RDMADepth >= 0
		c[i] = r
	}
	return c
}

// chooseMech is sm's default table with choose_mechanism: a message alone
// above 64 KiB is offered by CMA and the receiver chooses; up to 64 KiB,
// and behind other rendezvous sends to the same peer (osu bw's window,
// where both processes copy at once anyway), the pipeline as in
// defaultMech. At 64 KiB the pipeline had both the lower median and the
// lower 90th percentile over 1,209 idle pairs in both of the VM's states
// (12.0 us and 29.2 against CMA's 18.3 and 30.7), so there is nothing to
// choose; and 32 pairs under load 15-22 with the choice (probes every 1
// ms) put it ahead in one measure and behind in another. From 256 KiB the
// pipeline's tail is CMA's double or worse (1 MiB: 90th percentile 223 us
// against 108), which is what the choice wins back.
var chooseMech = core.MechTable{
	{Max: 64 << 10, RDMADepth: core.NoRDMA},
	{RDMADepth: 0, Choose: true},
}
