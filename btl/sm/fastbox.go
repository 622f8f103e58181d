package sm

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/gobtl/gobtl/btl/sm/internal/release"
	"github.com/gobtl/gobtl/core"
)

// A fast box is a byte ring in the receiver's segment written by one
// sender. A slot is a 64-bit header word followed by a frame, padded to a
// whole number of cache lines, and every slot starts a line:
//
//	header = frame length (low 32 bits) | per-pair sequence number << 32
//
// A zero header means "nothing yet"; the length skipLen means "the rest of
// the ring is unused, continue at its start". Positions are byte counters
// that only grow; the ring index is the position modulo the ring size.
//
// Invariants that make the ring safe without any lock:
//   - the sender writes only between its position and the receiver's
//     published position plus the ring size (minus one line of reserve);
//   - the header word of every line between the sender's position (tail)
//     and its zeroed frontier (clear, above tail) is zero; the sender
//     publishes a slot only once the header word after it is below the
//     frontier, so the receiver reading past the newest slot always finds
//     a zero;
//   - the header is published with a release store after the frame is
//     written, and read with an atomic load before the frame is read.
//
// Why a line per slot and a frontier: the receiver polls the line at its
// read position, and each line the sender writes there costs a trip of
// that line between the cores. An eager frame of up to 24 payload bytes
// (slotHdr+core.HeaderSize+24 = 64) fills one line, and publishing it
// writes that line alone: the sender zeroes header words ahead after it
// has published (zeroAhead, off the message's path), within the space the
// receiver has given back. With slots packed at 16 bytes, half of them
// straddled two lines, and the header word zeroed before each release
// store lay in another line for a quarter of them.
const skipLen = 0xFFFFFFFF

// slotHdr is the bytes a slot adds in front of a frame.
const slotHdr = 8

func slotBytes(frameLen int) uint64 { return uint64(align(slotHdr+frameLen, cacheLine)) }

// zeroAhead is how far beyond its position the sender keeps header words
// zeroed; it zeroes when half of that is left. 8 lines: an 8-byte
// ping-pong between cores that share no cache took 0.355 us one way with
// 16 lines (bursts of 8 zeroing stores right after the release store) and
// 0.326-0.331 with 2, 4 or 8 (alternating runs, the medians of 13-16
// pairs); fewer lines cost more calls of publishNearFrontier per message
// (sm's instructions per message: 16 lines 232, 8 lines 237, 4 lines 245).
const zeroAhead = 8 * cacheLine

// outBox is the sender's side of a fast box.
type outBox struct {
	ring  []byte
	base  unsafe.Pointer // &ring[0]
	mask  uint64
	size  uint64
	headp *uint64 // the receiver's published read position
	tail  uint64  // next write position
	head  uint64  // last read of *headp
	clear uint64  // zeroed frontier: line-start words in [tail, clear) are zero
}

// boxOf finds sender's fast box in seg: its ring, the ring's size and the
// receiver's published read position.
func boxOf(seg *segment, sender int) (ring []byte, size uint64, headp *uint64) {
	off := seg.lay.fbox(sender)
	return seg.mem[off+cacheLine : off+cacheLine+seg.lay.fboxSize], uint64(seg.lay.fboxSize), seg.u64(off)
}

// boxDropped is the offset, in a fast box's control line, of the word
// the box's receiver sets when it drops the box's sender (Disconnect):
// the line's writer is the receiver, as for the read position beside it,
// and the sender reads it at its liveness checks.
const boxDropped = 8

// drop marks sender's box in seg, this rank's segment, dropped.
func drop(seg *segment, sender int) {
	atomic.StoreUint32(seg.u32(seg.lay.fbox(sender)+boxDropped), 1)
}

// dropped reports whether the owner of seg, a peer's segment, dropped
// sender's box.
func dropped(seg *segment, sender int) bool {
	return atomic.LoadUint32(seg.u32(seg.lay.fbox(sender)+boxDropped)) != 0
}

func (o *outBox) init(seg *segment, sender int) {
	o.ring, o.size, o.headp = boxOf(seg, sender)
	o.base = unsafe.Pointer(&o.ring[0])
	o.mask = o.size - 1
	// A new box starts where the receiver is: zero unless this sender
	// reconnects to a box it used before.
	o.head = atomic.LoadUint64(o.headp)
	o.tail = o.head
	// Only the header word at tail is known to be zero (the previous
	// sender's invariant, or a new segment's zero pages).
	o.clear = o.tail + cacheLine
}

func (o *outBox) word(idx uint64) *uint64 { return (*uint64)(unsafe.Pointer(&o.ring[idx])) }

// put writes one frame — the header's words hw (core.Header.Words,
// core.EagerWords), then pre and data — and publishes it with sequence
// number seq. It reports false when the ring has no room; the caller
// sends the frame another way.
//
// It writes through pointers into the ring rather than through slices:
// the room check makes idx+need ≤ size, and the slot holds the frame, so
// there is nothing for bounds checks to catch, and they were a fifth of
// an eager message's write.
func (o *outBox) put(hw *[4]uint64, pre, data []byte, seq uint32) bool {
	n := core.HeaderSize + len(pre) + len(data)
	need := slotBytes(n)
	idx := o.tail & o.mask
	if idx+need > o.size || o.size-(o.tail-o.head) < need+cacheLine {
		var ok bool
		if idx, ok = o.room(need); !ok {
			return false
		}
	}
	slot := unsafe.Add(o.base, idx)
	f := (*[core.HeaderSize]byte)(unsafe.Add(slot, slotHdr))
	binary.LittleEndian.PutUint64(f[0:], hw[0]) // word by word: PutWords would copy *hw to the stack first
	binary.LittleEndian.PutUint64(f[8:], hw[1])
	binary.LittleEndian.PutUint64(f[16:], hw[2])
	binary.LittleEndian.PutUint64(f[24:], hw[3])
	k := 0
	if len(pre) > 0 { // an eager frame has none: no memmove call for nothing
		k = copy(unsafe.Slice((*byte)(unsafe.Add(slot, slotHdr+core.HeaderSize)), len(pre)), pre)
	}
	putPayload(unsafe.Add(slot, slotHdr+core.HeaderSize+k), data)
	o.publish(slot, need, uint64(n)|uint64(seq)<<32)
	return true
}

// publish makes the slot at tail, need bytes written, visible with
// header hdr. Far from the zeroed frontier that is the release store
// alone, and the slot's line is the only one written (SendEager does the
// same in place).
func (o *outBox) publish(slot unsafe.Pointer, need, hdr uint64) {
	if o.advance(need) {
		o.publishNearFrontier(slot, hdr)
		return
	}
	release.Store64((*uint64)(slot), hdr)
}

// advance moves the tail past a slot of need bytes and reports whether
// the new tail is near enough the zeroed frontier that publishing must
// go through publishNearFrontier. Small enough to inline, so that
// SendEager, which publishes in place, shares the rule without a call.
func (o *outBox) advance(need uint64) (nearFrontier bool) {
	o.tail += need
	return o.clear <= o.tail+zeroAhead/2
}

// publishNearFrontier is publish once the new tail is within half of
// zeroAhead of the zeroed frontier. Only when the tail has passed it (a
// frame longer than that, or a frontier held back by a stale read
// position) is a header word zeroed before the release store, as it
// must be; otherwise the zeroing comes after, a few lines at a time, to
// zeroAhead beyond the tail or as far as the space the receiver has given
// back allows: a header word is written only once the receiver is done
// with its line. Not inlined, so that the
// common case stays small.
//
//go:noinline
func (o *outBox) publishNearFrontier(slot unsafe.Pointer, hdr uint64) {
	if o.tail >= o.clear {
		*(*uint64)(unsafe.Add(o.base, o.tail&o.mask)) = 0
		o.clear = o.tail + cacheLine
	}
	release.Store64((*uint64)(slot), hdr)
	lim := o.head + o.size - cacheLine + 1 // header words below lim are in given-back lines
	if lim < o.tail+zeroAhead/2 {
		// Held back by the read position last seen: look again, now that
		// the slot is out, rather than zero the next header before a
		// release store once a lap.
		o.head = atomic.LoadUint64(o.headp)
		lim = o.head + o.size - cacheLine + 1
	}
	c := o.clear
	for end := min(o.tail+zeroAhead, lim); c < end; c += cacheLine {
		*(*uint64)(unsafe.Add(o.base, c&o.mask)) = 0
	}
	o.clear = max(c, o.clear)
}

// putPayload copies data into a slot at dst. A payload of 8 to 16 bytes
// (a message-rate benchmark's, an MPI_Allreduce of one or two doubles)
// goes as two 8-byte words that overlap when it is shorter than 16,
// without the call to memmove, which costs more than the copy.
func putPayload(dst unsafe.Pointer, data []byte) {
	if k := len(data); k >= 8 && k <= 16 {
		w := (*[16]byte)(dst)
		binary.LittleEndian.PutUint64(w[k-8:], binary.LittleEndian.Uint64(data[k-8:]))
		binary.LittleEndian.PutUint64(w[:8], binary.LittleEndian.Uint64(data))
		return
	}
	copy(unsafe.Slice((*byte)(dst), len(data)), data)
}

// getPayload copies a slot's payload at src into buf, putPayload's
// mirror.
func getPayload(buf []byte, src unsafe.Pointer) {
	if k := len(buf); k >= 8 && k <= 16 {
		w := (*[16]byte)(src)
		binary.LittleEndian.PutUint64(buf[k-8:], binary.LittleEndian.Uint64(w[k-8:]))
		binary.LittleEndian.PutUint64(buf, binary.LittleEndian.Uint64(w[:8]))
		return
	}
	copy(buf, unsafe.Slice((*byte)(src), len(buf)))
}

// room is put's slow case, a slot of need bytes that may not fit: it
// reads the receiver's position again, and puts a skip marker at the end
// of the ring when the slot does not fit before it. It returns the
// slot's index, or false when the ring has no room.
func (o *outBox) room(need uint64) (uint64, bool) {
	idx := o.tail & o.mask
	skip := uint64(0)
	if idx+need > o.size {
		skip = o.size - idx
	}
	if o.size-(o.tail-o.head) < skip+need+cacheLine {
		o.head = atomic.LoadUint64(o.headp)
		if o.size-(o.tail-o.head) < skip+need+cacheLine {
			return 0, false
		}
	}
	if skip > 0 {
		*o.word(0) = 0
		atomic.StoreUint64(o.word(idx), skipLen)
		o.tail += skip
		o.clear = max(o.clear, o.tail+cacheLine)
		idx = 0
	}
	return idx, true
}

// inBox is the receiver's side of a fast box.
type inBox struct {
	ring      []byte
	base      unsafe.Pointer // &ring[0]
	mask      uint64
	size      uint64
	headp     *uint64
	head      uint64 // next read position
	published uint64 // last value stored to *headp
	maxFrame  uint32
}

func (in *inBox) init(seg *segment, sender, maxFrame int) {
	in.ring, in.size, in.headp = boxOf(seg, sender)
	in.base = unsafe.Pointer(&in.ring[0])
	in.mask = in.size - 1
	in.head = atomic.LoadUint64(in.headp)
	in.published = in.head
	in.maxFrame = uint32(maxFrame)
}

// peek returns the frame at the read position and its sequence number, or
// ok=false when there is none. A slot that cannot be valid (a length beyond
// the box's limit) returns bad=true.
func (in *inBox) peek() (frame []byte, seq uint32, ok, bad bool) {
	for {
		idx := in.head & in.mask
		w := in.word(idx)
		if w == 0 {
			return nil, 0, false, false
		}
		n := uint32(w)
		if n == skipLen {
			in.head += in.size - idx
			continue
		}
		if n < core.HeaderSize || n > in.maxFrame || idx+slotHdr+uint64(n) > in.size {
			return nil, 0, false, true
		}
		return in.ring[idx+slotHdr : idx+slotHdr+uint64(n)], uint32(w >> 32), true, false
	}
}

// word reads the header word of the slot at index idx.
func (in *inBox) word(idx uint64) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&in.ring[idx])))
}

// advance consumes the frame returned by peek.
func (in *inBox) advance(frameLen int) { in.head += slotBytes(frameLen) }

// publish lets the sender see the space consumed so far.
func (in *inBox) publish() {
	if in.head != in.published {
		// Release: the sender may reuse the space only after our reads of it.
		release.Store64(in.headp, in.head)
		in.published = in.head
	}
}
