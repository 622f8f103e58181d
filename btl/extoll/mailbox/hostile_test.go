package mailbox

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"unsafe"
)

// The words of a mailbox that other processes write — the write and read
// pointers, the slots' stamps — may hold anything; a producer still
// writes only inside the ring and returns (a stamp ahead of a write
// pointer that never moves had it spin for ever), and Attach refuses a
// header whose slot count the region cannot hold.
func TestHostileControlWordsNeverMoveAWriteOutsideTheRing(t *testing.T) {
	const slots, guard = 8, 4096
	words := make([]uint64, (Size(slots)+2*guard)/8)
	all := unsafeBytes(words)
	for i := range all {
		all[i] = 0xA5
	}
	mem := all[guard : guard+Size(slots)]
	if _, err := Format(mem, slots); err != nil {
		t.Fatal(err)
	}
	r, err := Attach(mem)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(off int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[off])) }
	for range 10000 {
		switch rng.IntN(3) {
		case 0:
			atomic.StoreUint64(word(offEnq), rng.Uint64())
		case 1:
			atomic.StoreUint64(word(offDeq), rng.Uint64())
		default:
			atomic.StoreUint64(word(ctlSize+rng.IntN(slots)*64), rng.Uint64())
		}
		if rng.IntN(4) == 0 {
			// A stamp that lets the next claim through.
			pos := atomic.LoadUint64(word(offEnq))
			atomic.StoreUint64(r.hdr(pos), uint64(uint32(pos)))
		}
		r.TryPut(packet(8, 1, 7), 3)
	}
	for i, b := range all[:guard] {
		if b != 0xA5 {
			t.Fatalf("byte %d before the region written", i)
		}
	}
	for i, b := range all[guard+Size(slots):] {
		if b != 0xA5 {
			t.Fatalf("byte %d after the region written", i)
		}
	}
	for _, n := range []uint64{0, 1, slots + 1, 1 << 31, 1 << 62} {
		binary.LittleEndian.PutUint64(mem[offSlots:], n)
		if _, err := Attach(mem); err == nil {
			t.Errorf("a header of %d slots on a region of %d attached", n, slots)
		}
	}
}
