package shm

import (
	"fmt"
	"sync/atomic"

	"github.com/gobtl/gobtl/coll"
)

// Ranks of one broadcast or reduce that pass equal lengths but name
// different roots take the same path, slots or chunks, but wait on
// different lines: a small broadcast's tree is rotated to the root, so
// a rank may wait for a parent that, by its own call, has no children
// (and never writes the slot) or waits in turn; a large broadcast's rank
// waits for the fills of a rank that takes instead; a reduce's root that
// is not rank 0 waits for rank 0's hand-off, which goes elsewhere. As
// for lengths (straddle.go), a call whose ranks agree pays nothing more
// while its data is there: the root rides in words a rank writes anyway,
// and the rest is looked at in the waiting loops.
//
//   - A slot's length word holds the root its writer named beside the
//     length (slotWord): a rank that reads a slot compares both in one
//     word, as it compared the length alone (slot).
//   - A chunk collective's rank publishes its root, in a word of its own
//     (cCall: seq<<32 | root), before its length word (begin0), and
//     checkLen compares it with the length. A large reduce's ranks read
//     every rank's words on their first step: of two ranks that differ,
//     the one that looks first is told (the other cannot have finished).
//   - A rank of a broadcast or a reduce that waits beyond its spin
//     (idle) announces its root in cCall (announce), once per call; a
//     rank waiting for rank x fails once x announced another root in
//     this collective (otherRoot). The checks below wait for the spin
//     too: a call whose data comes in time reads nothing more.
//   - A rank waiting in a slot of rank x fails once x finished this
//     collective (its done counter) and the slot still does not hold it:
//     a rank that agrees writes the slot before it finishes, and does not
//     write it again before this rank finishes (node.free).
//   - A large broadcast's rank waiting for the root it names, x, fails
//     once x took steps of this collective without filling any: a root
//     fills each step before it takes it.
//   - A chunk collective begins its fills only once every rank took the
//     first step of this rank's last one (op.gate): a broadcast's rank
//     that took from another root than the one a slower rank names cannot
//     fill the next collective's first step before that rank looked, nor
//     rewrite its words, so that a rank finds the fill of the collective
//     it waits for or none (checkLen no longer meets a rank that moved on
//     to the chunks, except one that took a slot: straddle.go). It costs
//     nothing where the last collective had as many steps as the
//     pipeline's depth: the fills wait for its first step anyway.
//
// Whom a rank waits for decides who is told. The ranks' waits form
// chains (each rank waits for one rank at a time); a chain of ranks that
// name one root leads to that root, which writes; so a rank that waits
// for ever waits, down its chain, for a rank that names another root,
// and the last rank of the chain that names the first one's root waits
// for it: it is told — by the slot it reads, the root it announced, or
// its counters — and breaks the segment, and every rank that waits fails
// with ErrMismatch.
//
// What no rank can be told: a rank that names itself the root of a
// broadcast only writes (in a slot, or in chunks whose reuse any rank's
// takes allow) and leaves with its own vector — ranks that each name themselves, or
// whose readers name them, are all content, and no rank sees anything
// wrong; a rank of a small reduce that only sends leaves before the
// others compare, as a broadcast's rank that read from the root it named
// does, and a large reduce's root that looked before the rank that
// differs (it has the sum, whoever else took itself for the root). None
// of them takes wrong data: what a broadcast's rank reads comes from the
// root it named, whose slot or words said so. A rank that leaves is
// told, if at all, by its next collective, which fails on the broken
// segment; where every rank is content, none is.

// cCall is the word, in a rank's done line, where it publishes the root
// of its call (callRoot).
const cCall = cDone + 16

func callRoot(seq uint64, root int) uint64 { return seq<<32 | uint64(uint32(root)) }

// slotWord is what a slot's length word holds: the bytes and the root.
func slotWord(n, root int) uint64 { return uint64(uint32(root))<<32 | uint64(uint32(n)) }

// rooted reports whether this rank's call is a broadcast or a reduce.
func (o *op) rooted() bool {
	return o.kind == kBcast || o.kind == kReduce || o.kind == kBcastChunks || o.kind == kReduceChunks
}

// announce publishes the root of this rank's call, once.
func (o *op) announce() {
	if !o.said {
		o.said = true
		atomic.StoreUint64(o.m.seg.u64(o.m.seg.rank(o.m.me)+cCall), callRoot(o.seq, o.root))
	}
}

// idle reports whether this rank's wait has outlasted the spin: only
// then does it announce its root and read the other ranks' done lines
// and words, which the rank it waits for writes in every call — read
// while it spins, they would cost that rank a transfer of the line on
// every call whose ranks agree (an 8-byte broadcast's median went from
// 90 to 190 ns in more runs of BenchmarkCollectives2).
func (o *op) idle() bool {
	o.polls++
	return o.polls > o.m.spin
}

// otherRoot returns ErrMismatch if rank x announced a root other than
// this rank's in this collective.
func (o *op) otherRoot(x int) error {
	w := atomic.LoadUint64(o.m.seg.u64(o.m.seg.rank(x) + cCall))
	if w>>32 != o.seq&0xffffffff || uint32(w) == uint32(o.root) {
		return nil
	}
	return fmt.Errorf("coll/shm: %s: rank %d named root %d, this one %d: %w", o, x, uint32(w), o.root, coll.ErrMismatch)
}

// missing looks, while this rank waits for rank x's slot at off, for a
// sign that x never writes it in this collective: it took the chunks
// (chunked), it named another root, or it finished the collective
// without writing the slot.
func (o *op) missing(x, off int) (bool, error) {
	if done, err := o.chunked(x); done || !o.rooted() || !o.idle() {
		return done, err
	}
	o.announce()
	if err := o.otherRoot(x); err != nil {
		return true, err
	}
	s := o.m.seg
	if atomic.LoadUint64(s.counter(x, cDone)) < o.seq || atomic.LoadUint64(s.u64(off+sSeq)) == o.seq {
		return false, nil
	}
	return true, fmt.Errorf("coll/shm: %s: rank %d finished it without writing the slot this rank waits for (another root): %w",
		o, x, coll.ErrMismatch)
}

// unfilled looks, while a large broadcast's rank waits for the fills of
// x, the root it names, for a sign that x does not take itself for the
// root: it took a slot (slotted), named another root, or took steps of
// this collective without filling any.
func (o *op) unfilled(x int) (bool, error) {
	if done, err := o.slotted(x); done || !o.idle() {
		return done, err
	}
	o.announce()
	if err := o.otherRoot(x); err != nil {
		return true, err
	}
	s := o.m.seg
	if atomic.LoadUint64(s.counter(x, cTake)) <= o.t0 || atomic.LoadUint64(s.counter(x, cFill)) > o.t0 {
		return false, nil
	}
	return true, fmt.Errorf("coll/shm: %s: rank %d took the broadcast's data instead of filling it (another root): %w",
		o, x, coll.ErrMismatch)
}
