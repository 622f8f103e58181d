package sm

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/gobtl/gobtl/core"
)

// An eager frame of up to 24 payload bytes — an 8-byte message's among
// them — fills one cache line and no more, and every slot starts a line,
// so the receiver never needs two lines for one small message.
func TestAnEagerFrameOfUpTo24BytesIsOneCacheLine(t *testing.T) {
	for n := 0; n <= 24; n++ {
		if got := slotBytes(core.HeaderSize + n); got != cacheLine {
			t.Errorf("slot of an eager frame with %d payload bytes is %d bytes, want one line (%d)", n, got, cacheLine)
		}
	}
	if got := slotBytes(core.HeaderSize + 25); got != 2*cacheLine {
		t.Errorf("slot of 25 payload bytes is %d bytes, want two lines", got)
	}
	for n := 1; n < 5000; n += 37 {
		if got := slotBytes(core.HeaderSize + n); got%cacheLine != 0 || got < uint64(slotHdr+core.HeaderSize+n) {
			t.Fatalf("slot of %d payload bytes is %d bytes: not whole lines holding the frame", n, got)
		}
	}
}

// tiny is a box of 16 lines, in which the space given back holds the
// zeroed frontier back at almost every send.
var tiny = map[string]string{"fastbox_size": "1KiB", "fastbox_max": "256B"}

// ringSnap is a copy of a box's ring, for finding what one send wrote.
type ringSnap struct{ b []byte }

// changed lists the positions (in [from, to), taken modulo the ring)
// whose byte differs between the snapshot and ring now.
func (s ringSnap) changed(o *outBox, from, to uint64) []uint64 {
	var ps []uint64
	for p := from; p < to; p++ {
		if s.b[p&o.mask] != o.ring[p&o.mask] {
			ps = append(ps, p)
		}
	}
	return ps
}

// checkFrontier fails unless the header word of every line in [tail,
// clear) is zero, clear is above tail, and the frontier stays within the
// space the receiver has given back.
func checkFrontier(t *testing.T, o *outBox, what string) {
	t.Helper()
	if o.clear <= o.tail || o.clear > o.head+o.size {
		t.Fatalf("%s: frontier %d outside (tail %d, head %d + size %d]", what, o.clear, o.tail, o.head, o.size)
	}
	for p := o.tail; p < o.clear; p += cacheLine {
		if w := *o.word(p & o.mask); w != 0 {
			t.Fatalf("%s: header word at %d (tail %d, frontier %d) is %#x, want zero", what, p, o.tail, o.clear, w)
		}
	}
}

// Publishing an eager frame writes its own line and nothing else the
// receiver might be reading: with a receiver that keeps up, the header
// word after every one-line slot is zero before the slot is written (the
// condition under which publish writes the slot's line alone), and a
// send changes no byte outside the slot except header words beyond the
// old frontier, which are zeroed after the release store. With a receiver
// that lags (a stale read position), the frontier never passes the space
// it gave back, and no byte of a frame it has not consumed changes.
// Every byte the sender may overwrite is poisoned before each send, so a
// write of a zero over a zero cannot hide.
func TestPublishingAnEagerFrameWritesOnlyItsLine(t *testing.T) {
	for _, c := range []struct {
		lag    int
		params map[string]string
	}{{1, nil}, {7, nil}, {300, nil}, {1, tiny}, {5, tiny}} {
		lag := c.lag
		mods, _ := openRanks(t, 2, c.params)
		delivered := 0
		mods[1].Register(core.TypeEager, func(*core.Header, []byte) { delivered++ })
		catchUp := func(sent int) {
			for mods[1].Progress() > 0 {
			}
			if delivered != sent {
				t.Fatalf("lag %d: %d frames delivered of %d sent", lag, delivered, sent)
			}
		}
		ep, _ := mods[0].Endpoint(1)
		es := ep.(core.Eager)
		ep.Send(core.Header{Type: core.TypeEager, Context: 1}, nil, nil, 0) // announces the sender
		o := &mods[0].peers[1].out
		sent, alone := 1, 0
		for i := range 4 * int(o.size) / cacheLine {
			if i%lag == 0 {
				catchUp(sent)
			}
			checkFrontier(t, o, "before a send")
			b := poisonBox(o)
			msg := bytes.Repeat([]byte{byte(i)}, 1+i%24)
			if !es.SendEager(1, 0, uint32(sent), msg) {
				t.Fatalf("lag %d: SendEager %d declined", lag, i)
			}
			sent++
			slot := b.check(t, o, lag, i)
			if slot == b.tail && lag == 1 && b.clear > b.tail+cacheLine {
				alone++
			}
			checkFrontier(t, o, "after a send")
		}
		catchUp(sent)
		if lag == 1 && c.params == nil && alone < 4*int(o.size)/cacheLine-2 {
			t.Fatalf("a receiver that keeps up: %d of %d slots had their next header zeroed beforehand", alone, 4*int(o.size)/cacheLine)
		}
	}
}

// boxBefore is a box as it was before a send: its positions, the
// receiver's read position as published (given) and a copy of its ring.
type boxBefore struct {
	tail, clear, head, given uint64
	snap                     ringSnap
}

// frontierMarker is written into the zeroed header words past the tail
// before a send, so that a zero written over them before the release
// store shows.
const frontierMarker = 0x5A5A5A5A5A5A5A5A

// poisonBox poisons what the sender may overwrite — all it has been
// given back, but for the zeroed header words, which get frontierMarker
// — and returns the box as it is then.
func poisonBox(o *outBox) boxBefore {
	b := boxBefore{tail: o.tail, clear: o.clear, head: o.head, given: atomic.LoadUint64(o.headp)}
	for p := b.tail; p < b.head+o.size; p++ {
		if p >= b.clear || p%cacheLine >= 8 {
			o.ring[p&o.mask] = 0xA5
		}
	}
	for p := b.tail + cacheLine; p < b.clear; p += cacheLine {
		*o.word(p & o.mask) = frontierMarker
	}
	b.snap = ringSnap{bytes.Clone(o.ring)}
	return b
}

// check fails unless send i wrote its slot, starting a line, and nothing
// else the receiver might read: nothing it has not given back, between
// the old tail and the slot only an end-of-ring marker, past the slot
// only header words beyond the old frontier and below the new one, none
// of those below the old frontier (the markers stay). It puts the zeros
// back over the markers and returns the slot.
func (b boxBefore) check(t *testing.T, o *outBox, lag, i int) uint64 {
	t.Helper()
	slot := o.tail - cacheLine
	if slot%cacheLine != 0 {
		t.Fatalf("lag %d: slot at %d does not start a line", lag, slot)
	}
	for p := o.tail; p < b.clear; p += cacheLine {
		if *o.word(p & o.mask) != frontierMarker {
			t.Fatalf("lag %d: send %d (slot %d) wrote the header word at %d, zero already", lag, i, slot, p)
		}
	}
	if ps := b.snap.changed(o, b.given, b.tail); len(ps) > 0 {
		t.Fatalf("lag %d: send %d changed position %d, in frames the receiver had not given back [%d, %d)", lag, i, ps[0], b.given, b.tail)
	}
	for _, p := range b.snap.changed(o, b.tail, slot) {
		if p != b.tail && (p-b.tail >= 8 || *o.word(b.tail & o.mask) != skipLen) {
			t.Fatalf("lag %d: send %d changed position %d between the tail %d and its slot %d", lag, i, p, b.tail, slot)
		}
	}
	for _, p := range b.snap.changed(o, o.tail, b.head+o.size) {
		if p%cacheLine >= 8 || p < b.clear || p >= o.clear {
			t.Fatalf("lag %d: send %d (slot %d, old frontier %d) changed position %d", lag, i, slot, b.clear, p)
		}
	}
	for p := o.tail; p < b.clear; p += cacheLine {
		*o.word(p & o.mask) = 0 // the marker goes before the receiver looks
	}
	return slot
}

// A frame longer than the distance the sender keeps zeroed passes the
// frontier: the header word after it is zeroed before it is published,
// and the frames after it still arrive.
func TestAFrameLongerThanTheZeroedDistanceZeroesTheNextHeaderFirst(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	var got [][]byte
	mods[1].Register(core.TypeEager, func(_ *core.Header, b []byte) { got = append(got, bytes.Clone(b)) })
	ep, _ := mods[0].Endpoint(1)
	o := &mods[0].peers[1].out
	var want [][]byte
	for i := range 200 {
		n := 8
		if i%3 == 1 {
			n = int(zeroAhead) + 200 + i
		}
		msg := bytes.Repeat([]byte{byte(i + 1)}, n)
		if err := ep.Send(core.Header{Type: core.TypeEager, Context: 1, PSN: uint32(i)}, nil, msg, 0); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		want = append(want, msg)
		checkFrontier(t, o, "after a send")
		if i%5 == 4 {
			for mods[1].Progress() > 0 {
			}
		}
	}
	for mods[1].Progress() > 0 {
	}
	if len(got) != len(want) {
		t.Fatalf("%d frames delivered, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d: got %d bytes, want %d", i, len(got[i]), len(want[i]))
		}
	}
}
