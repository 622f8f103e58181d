package sm

import (
	"sync/atomic"
	"unsafe"

	"github.com/gobtl/gobtl/btl/sm/internal/release"
)

// The FIFO is Vyukov's bounded multi-producer queue in the receiver's
// segment, consumed by the receiver alone. Cell i holds a sequence word and
// a descriptor. A producer claims the position p whose cell's sequence is
// p by a CAS on the shared enqueue position, writes the descriptor and
// stores p+1; the consumer takes its position p when the cell says p+1,
// then stores p+cells to hand the cell to the producers of the next lap.
// The consumer's position is private, so an idle FIFO costs the receiver
// one cache line that stays in its cache.
//
// A descriptor names a fragment in the sender's segment:
// (sender rank + 1) << 40 | offset.
const descOffBits = 40

func makeDesc(sender, off int) uint64 { return uint64(sender+1)<<descOffBits | uint64(off) }

func splitDesc(d uint64) (sender, off int) {
	return int(d>>descOffBits) - 1, int(d & (1<<descOffBits - 1))
}

// fifoOut is a producer's handle on a receiver's FIFO.
type fifoOut struct {
	cells []byte
	mask  uint64
	enq   *uint64
}

func (f *fifoOut) init(seg *segment) {
	f.cells = seg.mem[seg.lay.fifoOff : seg.lay.fifoOff+seg.lay.fifoCells*fifoCellSize]
	f.mask = uint64(seg.lay.fifoCells - 1)
	f.enq = seg.u64(offFifoEnq)
}

func cellSeq(cells []byte, i uint64) *uint64 {
	return (*uint64)(unsafe.Pointer(&cells[i*fifoCellSize]))
}

func cellVal(cells []byte, i uint64) *uint64 {
	return (*uint64)(unsafe.Pointer(&cells[i*fifoCellSize+8]))
}

// push enqueues d; false means the FIFO is full.
func (f *fifoOut) push(d uint64) bool {
	pos := atomic.LoadUint64(f.enq)
	for {
		i := pos & f.mask
		seq := atomic.LoadUint64(cellSeq(f.cells, i))
		switch dif := int64(seq - pos); {
		case dif == 0:
			if atomic.CompareAndSwapUint64(f.enq, pos, pos+1) {
				atomic.StoreUint64(cellVal(f.cells, i), d)
				atomic.StoreUint64(cellSeq(f.cells, i), pos+1)
				return true
			}
			pos = atomic.LoadUint64(f.enq)
		case dif < 0:
			return false
		default:
			pos = atomic.LoadUint64(f.enq)
		}
	}
}

// fifoIn is the receiver's side.
type fifoIn struct {
	cells []byte
	mask  uint64
	deq   uint64
}

func (f *fifoIn) init(seg *segment) {
	f.cells = seg.mem[seg.lay.fifoOff : seg.lay.fifoOff+seg.lay.fifoCells*fifoCellSize]
	f.mask = uint64(seg.lay.fifoCells - 1)
}

// peek returns the descriptor at the head, if one is there.
func (f *fifoIn) peek() (uint64, bool) {
	i := f.deq & f.mask
	if atomic.LoadUint64(cellSeq(f.cells, i)) != f.deq+1 {
		return 0, false
	}
	return atomic.LoadUint64(cellVal(f.cells, i)), true
}

// pop releases the head cell to the producers.
func (f *fifoIn) pop() {
	i := f.deq & f.mask
	release.Store64(cellSeq(f.cells, i), f.deq+f.mask+1)
	f.deq++
}
