package coll

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// Ranks that call a collective with arguments that do not fit together —
// different lengths, operations, allgatherv counts — fail it with
// ErrMismatch, every rank that waits in it alike and none with
// ErrTruncated, without a message or a byte more for a call whose ranks
// agree.
//
// A collective's tag carries, beside its place in the sequence, a
// signature of the arguments every rank must pass alike (its kind, root,
// length and operation; sign): the messages of ranks that disagree do not
// match, so that no rank reduces another's vector with the wrong
// operation or reads a message of the wrong length, and the ranks that
// wait for them wait. A waiting round asks, every pml.StuckEvery polls
// that found nothing (pml.Stuck for a blocking call, Advance's count for
// a non-blocking one), whether a rank it waits on has sent a message of
// this collective under another signature (stuck): then the arguments
// differ. The rank that finds it tells every other rank with an empty
// notice of this collective (mismatched), which a rank waiting in it
// finds the same way, so that the ranks that wait on ranks that gave up
// do not wait for ever. A length that the signature does not cover (the
// counts of gatherv, scatterv, alltoallv, which differ by rank) is
// checked when a message arrives: short or long, it is ErrMismatch too
// (checkCounts, mismatch).
//
// What no rank can see without a message more: a rank that only sends in
// a collective (a broadcast's root, a leaf of a reduce) is done before
// anyone can tell it; and a root that differs between ranks leaves each
// rank either done or waiting on a rank that sends it nothing (two ranks
// that each take itself, or the other, for a reduce's root) — a stack's
// stall_timeout ends that wait with ErrStalled. A signature has 14 bits:
// one disagreement in 16383 passes as agreement, as every one did before.

// The bits of a collective's tag: tagBase, then the signature, then the
// low bits of the sequence number. The highest signature is a notice's.
const (
	seqBits   = 16
	seqMask   = 1<<seqBits - 1
	sigValues = tagBase>>seqBits - 1 // signatures 0..sigValues-1
	noticeSig = sigValues
)

// call is what every rank passes alike to a collective: its root (-1 for
// none), its length in bytes where the length is one for every rank (for
// allgatherv a hash of its counts, countsSig; 0 for the other v-forms,
// whose counts differ by rank) and its operation (zero for none).
type call struct {
	root, bytes int
	op          Op
}

// sameOp says whether a and b are the same operation value, compared by
// its words (a Func, which == cannot compare, is the same function only
// as the same value).
func sameOp(a, b Op) bool {
	return a.Size == b.Size && a.Commutative == b.Commutative &&
		*(*[2]uintptr)(unsafe.Pointer(&a.Fn)) == *(*[2]uintptr)(unsafe.Pointer(&b.Fn))
}

// countsSig stands for the counts of a v-form that every rank passes
// alike (allgatherv's) in a signature: a hash of them.
func countsSig(counts []int) int {
	h := uint64(14695981039346656037)
	for _, n := range counts {
		h = (h ^ uint64(n)) * 1099511628211
	}
	return int(h >> 1)
}

// resign signs s, a warm schedule again gave out, for cl: its operation
// is not the last call's.
func (s *schedule) resign(cl call) {
	s.sig = s.c.sign(s.kind, cl) << seqBits
	s.tag = tagBase | s.sig | s.tag&seqMask
}

// sign returns the signature of a collective of kind k called with cl.
// The goroutine that starts the collective calls it (its operation's
// cache is the Comm's: a Comm's collectives start one at a time).
func (c *Comm) sign(k Kind, cl call) int {
	h := uint64(cl.bytes)*0x9e3779b97f4a7c15 ^ uint64(cl.root+1)*0xc2b2ae3d27d4eb4f ^ uint64(k)<<56
	if cl.op.Fn != nil {
		h ^= c.opSig(cl.op)
	}
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return int(h % sigValues)
}

// opSig is a hash of an operation that every process of the job computes
// alike: its element size, whether it commutes, and its function's type
// by name (a type's address differs between processes built as position
// independent code). The last one is cached by the type's word.
func (c *Comm) opSig(op Op) uint64 {
	key := (*[2]uintptr)(unsafe.Pointer(&op.Fn))[0]
	if key != c.opKey {
		h := uint64(14695981039346656037) // FNV-1a
		for _, b := range []byte(reflect.TypeOf(op.Fn).String()) {
			h = (h ^ uint64(b)) * 1099511628211
		}
		c.opKey, c.opHash = key, h
	}
	h := c.opHash ^ uint64(op.Size)<<40
	if op.Commutative {
		h ^= 1 << 63
	}
	return h
}

// noticeTag is the tag of the notice of the collective whose tag is tag.
func noticeTag(tag int) int { return tagBase | noticeSig<<seqBits | tag&seqMask }

// collTag says whether tag is one of a collective's (not the PML's own
// barrier's).
func collTag(tag int) bool { return tag&tagBase != 0 }

// Stuck implements pml.Stuck for a blocking call's round: whether a rank
// it waits on called this collective with other arguments, or another
// rank found that they differ.
func (s *schedule) Stuck() error { return s.c.stuck(s) }

// stuck looks, while s waits, for a notice of s (another rank found the
// arguments differ) or, from each rank s waits on, a message of s under
// another signature. It returns an error wrapping ErrMismatch, or nil.
func (c *Comm) stuck(s *schedule) error {
	x := c.x
	if ok, st, _ := x.Iprobe(pml.AnySource, noticeTag(s.tag)); ok {
		c.drain(st)
		s.noticed = true
		return fmt.Errorf("rank %d found that the ranks called collective %d with arguments that do not fit together: %w", st.Source, s.tag&seqMask, ErrMismatch)
	}
	// The ranks s receives from in its current round — the steps since
	// the last wait mark, a preposted receive by its prepost — and in
	// the receives posted ahead of it: the steps say it, where the data
	// path keeps no record. No allocation: a round of a job whose ranks
	// agree may ask this many times.
	i := s.pc - 1
	if i >= 0 && s.steps[i].kind == stepWait {
		i-- // the mark that ended the round: run stops past it
	}
	for ; i >= 0 && s.steps[i].kind != stepWait; i-- {
		src := -1
		switch st := s.steps[i]; st.kind {
		case stepRecv:
			src = st.peer
		case stepAwait:
			src = s.prepostPeer(st.idx)
		}
		if err := c.foreign(s, src); err != nil {
			return err
		}
	}
	for _, st := range s.steps[:s.pc] {
		if st.kind == stepPrepost && st.idx < len(s.early) && s.early[st.idx].r != nil {
			if err := c.foreign(s, st.peer); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepostPeer is the rank of the prepost step with handle idx.
func (s *schedule) prepostPeer(idx int) int {
	for _, p := range s.steps {
		if p.kind == stepPrepost && p.idx == idx {
			return p.peer
		}
	}
	return -1
}

// foreign looks at the first message src sent on the collective context
// that no receive has taken: one of s's under another signature means the
// ranks disagree. Notices of collectives over, and messages of
// collectives that failed so, go (drain) — they would hide what came
// after them.
func (c *Comm) foreign(s *schedule, src int) error {
	if src < 0 {
		return nil
	}
	for range 8 {
		ok, st, err := c.x.Iprobe(src, pml.AnyTag)
		if !ok || err != nil || !collTag(st.Tag) {
			return nil
		}
		switch sig := st.Tag >> seqBits & (tagBase>>seqBits - 1); {
		case st.Tag&seqMask == s.tag&seqMask && sig != noticeSig && st.Tag != s.tag:
			return fmt.Errorf("rank %d called collective %d with other arguments than this rank's (a different length, root or operation): %w", src, s.tag&seqMask, ErrMismatch)
		case sig == noticeSig && older(st.Tag, s.tag), c.failedSeq(st.Tag):
			c.drain(st)
		default:
			return nil
		}
	}
	return nil
}

// drain receives the message st describes, into a buffer of its own, and
// lets it complete on its own.
func (c *Comm) drain(st pml.Status) {
	if r, err := c.x.Irecv(make([]byte, st.Count), st.Source, st.Tag); err == nil {
		_ = c.x.Free(r)
	}
}

// mismatched handles a collective that failed with err: if the ranks'
// arguments differ, this rank remembers the collective (its late
// messages are drained), tells the PML (Close then waits for the others
// only briefly: they may wait on this rank) and, unless another rank's
// notice said so, tells every other rank.
func (c *Comm) mismatched(s *schedule, err error) {
	if !errors.Is(err, ErrMismatch) {
		return
	}
	c.mu.Lock()
	c.failed[c.nfailed%len(c.failed)] = s.tag&seqMask | 1<<seqBits
	c.nfailed++
	c.mu.Unlock()
	c.x.Failed(err)
	if s.noticed {
		return
	}
	x, me, tag := c.x, c.Rank(), noticeTag(s.tag)
	for r := range c.Size() {
		if r == me {
			continue
		}
		if sent, err := x.TrySend(nil, r, tag); !sent && err == nil {
			if q, err := x.Isend(nil, r, tag); err == nil {
				_ = x.Free(q)
			}
		}
	}
}

// older says whether the collective of tag a came before that of tag b
// (their sequence numbers modulo 2^16, at most 2^15 apart).
func older(a, b int) bool { d := (b - a) & seqMask; return d > 0 && d < 1<<(seqBits-1) }

// failedSeq says whether tag is a message of a collective that failed
// here because the ranks' arguments differ.
func (c *Comm) failedSeq(tag int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.failed {
		if f == tag&seqMask|1<<seqBits {
			return true
		}
	}
	return false
}

// mismatch is the error of a round in which a receive got more bytes
// than this rank's arguments make (a v-form's counts that differ): the
// PML's truncation, which only the receivers see, becomes the ErrMismatch
// every rank that finds the disagreement reports.
func mismatch(err error) error {
	if errors.Is(err, core.ErrTruncated) {
		return fmt.Errorf("a rank sent more than this rank's arguments make (%v): %w", err, ErrMismatch)
	}
	return err
}
