package shm

import (
	"fmt"
	"sync/atomic"

	"github.com/gobtl/gobtl/coll"
)

// Ranks whose lengths fall on both sides of Options.Small take different
// paths — some the slots (small.go), the others the chunks (chunk.go) —
// and so wait on lines that the others never write: no length is
// compared (slot, checkLen), and without more they would wait until a
// stall timeout, by default for ever. Each path leaves a mark that the
// other can see, a line it writes anyway, so a rank that waits looks for
// the other path's mark in its waiting loop, where it is idle: a call
// whose ranks agree writes nothing more and reads nothing more while its
// data is there.
//
//   - A rank in the chunks counts the steps it filled (every rank of a
//     reduction, a broadcast's root, before it waits on anyone) or took
//     (a broadcast's other ranks, once they have the root's first step)
//     past op.t0, the steps begun before the collective — every rank's
//     alike while they agree. A rank that waits for rank x's slot fails
//     with ErrMismatch once x's counter passed t0 while x published
//     neither of its slots in the collective (chunked).
//   - A rank in a slot publishes a slot with the collective's sequence
//     number whenever another rank waits for its data there (the up slot
//     of a rank of the fan-in below the top, the down slot of a parent
//     of the fan-out, of a broadcast's root and of rank 0 handing a
//     reduce to its root). A rank that waits for rank x in the chunks
//     fails with ErrMismatch once x did (slotted).
//
// Neither mark lies when the ranks agree: no rank publishes a slot in a
// chunk collective, and a rank whose slot this rank waits for and whose
// counter passed t0 has begun a chunk collective after this one — then
// it published that slot first, and chunked reads the slot after the
// counter. (The flags are compared for equality, and a rank writes its
// slot again only once the ranks that read it, this one among them, have
// finished the collective: node.free.)
//
// Not every rank that waits sees a mark itself: it may wait for a rank
// that waits in turn before it marks anything (a rank of the fan-in
// waiting for its own children, a broadcast's rank in the chunks waiting
// for a root in a slot). But the fan-in's waits end at its leaves and
// the fan-out's at the root, which mark their path before they wait; so
// some rank finds the disagreement, breaks the segment (node.fail), and
// every rank that waits fails with ErrMismatch too.
//
// What no rank can be told, as coll's own agreement cannot tell a rank
// that only sends (coll/agree.go): a rank that only writes and leaves — a
// broadcast's root in a slot, or in chunks that fit the pipeline's depth,
// a rank of a small reduce that only sends, a broadcast's rank that
// passed the root's length and so got its data — finishes the collective
// alone; its next one fails, the segment being broken. If that next one
// takes the chunks before a rank still waiting in the last one has seen
// the slot it left, that rank may read the new one's first step as the
// last one's (checkLen skips a rank that moved on); the broken word then
// fails the rest.

// chunked reports, while this rank waits in a slot of rank x, whether x
// took the chunks in this collective: its fill or take counter passed
// the steps begun before it while it published neither of its slots.
func (o *op) chunked(x int) (bool, error) {
	s := o.m.seg
	if atomic.LoadUint64(s.counter(x, cFill)) <= o.t0 && atomic.LoadUint64(s.counter(x, cTake)) <= o.t0 ||
		o.published(x) {
		return false, nil
	}
	return true, fmt.Errorf("coll/shm: %s: rank %d passed more than %d bytes (the chunks), this one %d: %w",
		o, x, s.lay.small, max(len(o.send), len(o.recv)), coll.ErrMismatch)
}

// slotted reports, while this rank waits in the chunks for rank x,
// whether x took a slot in this collective.
func (o *op) slotted(x int) (bool, error) {
	if !o.published(x) {
		return false, nil
	}
	return true, fmt.Errorf("coll/shm: %s: rank %d passed at most %d bytes (a slot), this one %d: %w",
		o, x, o.m.seg.lay.small, max(len(o.send), len(o.recv)), coll.ErrMismatch)
}

// published says whether rank x published one of its slots of this
// collective's generation in it.
func (o *op) published(x int) bool {
	s := o.m.seg
	return atomic.LoadUint64(s.u64(s.up(x, o.g)+sSeq)) == o.seq ||
		atomic.LoadUint64(s.u64(s.down(x, o.g)+sSeq)) == o.seq
}
