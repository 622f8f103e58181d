// Package mailbox is the VELO mailbox of seed 003 §2: a ring of 64-byte
// slots, written by every sender of a process and read by that process
// alone, in arrival order. It lives in any byte region — a file in /dev/shm
// mapped by all processes of a host, or ordinary memory for a process's
// network engine and for tests.
//
// The hardware writes a packet into the slot under the write pointer and
// the process polls the slot under its read pointer. Here several producers
// share the write pointer, so the ring is a bounded multi-producer queue in
// the style of Vyukov's: each slot's header word carries a 32-bit stamp that
// says, for the current lap, whether the slot is free for a producer
// (stamp = position) or full for the consumer (stamp = position + 1). A
// producer claims a position with one compare-and-swap on the write
// pointer, copies its packet and publishes it by storing the header word
// last; the consumer releases a slot by restamping it for the next lap. A
// full ring is reported to the producer, which then waits (back-pressure)
// — it never overwrites a slot.
package mailbox

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gobtl/gobtl/btl/extoll/nic"
)

// Layout of the region: a control block of three cache lines, then the
// slots.
const (
	offMagic   = 0  // magic
	offVersion = 8  // layout version
	offSlots   = 16 // number of slots
	offEnq     = 64 // write pointer (claimed positions), its own cache line
	offDeq     = 128
	ctlSize    = 192

	magic   = 0x786f626c6c6f7478 // "xtollbox"
	version = 1
)

// MinSlots is the smallest ring: with one slot a free and a full stamp would
// coincide.
const MinSlots = 2

// Size is the size in bytes of a region holding a ring of slots slots.
func Size(slots int) int { return ctlSize + slots*nic.SlotSize }

// Ring is a mailbox mapped by one process. The producer side (TryPut) is
// safe for concurrent use; the consumer side (Peek, Release) belongs to one
// goroutine at a time.
type Ring struct {
	mem   []byte
	slots uint64
	enq   *uint64
	deq   *uint64
	rpos  uint64 // consumer's read position
}

// Format initialises mem as an empty ring of slots slots and returns it.
// The owner formats; producers Attach afterwards.
func Format(mem []byte, slots int) (*Ring, error) {
	if slots < MinSlots || slots > 1<<30 {
		return nil, fmt.Errorf("mailbox: %d slots, want %d to %d", slots, MinSlots, 1<<30)
	}
	if len(mem) < Size(slots) {
		return nil, fmt.Errorf("mailbox: region of %d bytes is too small for %d slots (%d bytes)", len(mem), slots, Size(slots))
	}
	if uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("mailbox: region is not 8-byte aligned")
	}
	clear(mem[:Size(slots)])
	r := ring(mem, uint64(slots))
	for i := uint64(0); i < r.slots; i++ {
		atomic.StoreUint64(r.hdr(i), i)
	}
	binary.LittleEndian.PutUint64(mem[offSlots:], uint64(slots))
	binary.LittleEndian.PutUint64(mem[offVersion:], version)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&mem[offMagic])), magic)
	return r, nil
}

// Attach maps a ring that another process formatted.
func Attach(mem []byte) (*Ring, error) {
	if len(mem) < ctlSize || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("mailbox: region of %d bytes is not a mailbox", len(mem))
	}
	if m := atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[offMagic]))); m != magic {
		return nil, fmt.Errorf("mailbox: bad magic %#x (not formatted yet?)", m)
	}
	if v := binary.LittleEndian.Uint64(mem[offVersion:]); v != version {
		return nil, fmt.Errorf("mailbox: layout version %d, want %d", v, version)
	}
	// The slot count is read once, here, and every position is taken
	// modulo it: a producer never writes outside the region whatever the
	// ring's words say later.
	slots := binary.LittleEndian.Uint64(mem[offSlots:])
	if slots < MinSlots || slots > 1<<30 || uint64(len(mem)) < ctlSize+slots*nic.SlotSize {
		return nil, fmt.Errorf("mailbox: header says %d slots, region holds %d bytes", slots, len(mem))
	}
	return ring(mem, slots), nil
}

// New returns a ring in ordinary memory.
func New(slots int) (*Ring, error) {
	if slots < MinSlots || slots > 1<<30 {
		return nil, fmt.Errorf("mailbox: %d slots, want %d to %d", slots, MinSlots, 1<<30)
	}
	words := make([]uint64, Size(slots)/8)
	return Format(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8), slots)
}

func ring(mem []byte, slots uint64) *Ring {
	return &Ring{
		mem:   mem,
		slots: slots,
		enq:   (*uint64)(unsafe.Pointer(&mem[offEnq])),
		deq:   (*uint64)(unsafe.Pointer(&mem[offDeq])),
		rpos:  atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[offDeq]))),
	}
}

// Slots is the ring's capacity.
func (r *Ring) Slots() int { return int(r.slots) }

func (r *Ring) slot(pos uint64) *nic.Slot {
	return (*nic.Slot)(unsafe.Pointer(&r.mem[ctlSize+(pos%r.slots)*nic.SlotSize]))
}

func (r *Ring) hdr(pos uint64) *uint64 { return (*uint64)(unsafe.Pointer(r.slot(pos))) }

// TryPut writes the packet in s into the ring as coming from src and
// reports whether it fit. It returns false, having written nothing, when
// the ring is full.
func (r *Ring) TryPut(s *nic.Slot, src int) bool {
	fields := s.Fields()
	last := ^uint64(0)
	for {
		pos := atomic.LoadUint64(r.enq)
		if pos == last {
			// A slot ahead of the write pointer that the pointer has not
			// passed: no producer made that, the ring's words are
			// corrupt. Full, as far as this producer can tell, so that a
			// sender gives up at its stall bound rather than spin here.
			return false
		}
		h := r.hdr(pos)
		d := int32(uint32(atomic.LoadUint64(h)) - uint32(pos))
		switch {
		case d == 0:
			if !atomic.CompareAndSwapUint64(r.enq, pos, pos+1) {
				continue // another producer took pos
			}
			dst := r.slot(pos)
			copy(dst[nic.HeaderSize:], s[nic.HeaderSize:])
			atomic.StoreUint64(h, nic.WithSource(fields, src, uint32(pos+1)))
			return true
		case d < 0:
			// The slot still holds the packet of the previous lap, or a
			// producer of the previous lap has claimed it and not yet
			// published: the ring is full.
			return false
		}
		// d > 0: pos was taken and published meanwhile; reload.
		last = pos
	}
}

// Peek returns the oldest packet, or nil when the ring is empty. The slot
// stays the consumer's until Release.
func (r *Ring) Peek() *nic.Slot {
	pos := r.rpos
	if uint32(atomic.LoadUint64(r.hdr(pos))) != uint32(pos+1) {
		return nil
	}
	return r.slot(pos)
}

// Release frees the slot Peek returned for the next lap. Calling it when
// Peek returned nil corrupts the ring.
func (r *Ring) Release() {
	pos := r.rpos
	atomic.StoreUint64(r.hdr(pos), uint64(uint32(pos+r.slots)))
	r.rpos = pos + 1
	atomic.StoreUint64(r.deq, pos+1)
}

// Len is the number of slots claimed and not yet released: the occupancy
// as producers see it. It is a snapshot.
func (r *Ring) Len() int {
	d := atomic.LoadUint64(r.deq)
	e := atomic.LoadUint64(r.enq)
	if e < d {
		return 0
	}
	return int(e - d)
}
