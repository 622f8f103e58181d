package sm

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cacheLine is the unit of layout: fields written by different processes
// never share a line.
const cacheLine = 64

const (
	segMagic   = 0x316d736c74626f67 // "gobtlsm1"
	segVersion = 3                  // 2: the records of coop.go after the fragments; 3: fast-box slots start on a cache line
)

// Segment states, as the owner announces them to its peers.
const (
	stateInit   = 0
	stateReady  = 1
	stateClosed = 2 // the owner closed cleanly
	stateFailed = 3 // the owner declared itself dead (Abort)
)

// The control block at the start of a segment. Lines 0-1 are written once
// by the owner before it publishes stateReady; line 2 is the active-sender
// count that senders bump; line 3 is the FIFO's enqueue position that
// senders CAS; line 4 is the owner's state; line 5 holds the notifier's
// words (notify.go).
const (
	offMagic      = 0
	offVersion    = 8
	offRank       = 12
	offSize       = 16
	offPid        = 20
	offFboxSize   = 24
	offFragCount  = 28
	offFragStride = 32
	offFifoCells  = 36
	offMaxFrame   = 40
	offTotal      = 48 // u64
	offActiveN    = 2 * cacheLine
	offFifoEnq    = 3 * cacheLine
	offState      = 4 * cacheLine
	ctrlSize      = 6 * cacheLine
)

// Fragment header, one line before the frame. The frame starts up to a
// line later, placed so that its data segment (after the header and the
// caller's pre segment) starts on a cache line: both copies of the
// payload then move whole lines.
const (
	fragOffSeq   = 0  // u32: per-pair sequence number
	fragOffLen   = 4  // u32: frame bytes
	fragOffDone  = 8  // u32: set by the receiver when it is done
	fragOffFrame = 12 // u32: where the frame starts, after the header line
	fragHdr      = cacheLine
)

// fifoCellSize: a cell holds its sequence word and the descriptor.
const fifoCellSize = 16

// layout is where everything is in a segment. The owner computes it from
// its parameters; peers read it back from the control block.
type layout struct {
	size       int // ranks: fast boxes and active-list entries
	fboxSize   int // ring bytes of one fast box (a power of two)
	fragCount  int
	fragStride int
	maxFrame   int // largest frame a fragment holds (header included)
	fifoCells  int // a power of two
	activeOff  int
	fifoOff    int
	fboxOff    int
	fragOff    int
	coopOff    int // coopRecs records of coop.go
	total      int
}

func align(n, a int) int { return (n + a - 1) &^ (a - 1) }

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

func newLayout(size, fboxSize, fragCount, maxFrame int) layout {
	l := layout{size: size, fboxSize: fboxSize, fragCount: fragCount, maxFrame: maxFrame}
	l.fragStride = align(fragHdr+cacheLine+maxFrame, cacheLine)
	// Every fragment of every sender fits in the FIFO at once, so a sender
	// holding a fragment never finds the FIFO full in steady state.
	l.fifoCells = nextPow2(max(size*fragCount, 64))
	l.activeOff = ctrlSize
	l.fifoOff = align(l.activeOff+4*size, cacheLine)
	l.fboxOff = align(l.fifoOff+fifoCellSize*l.fifoCells, cacheLine)
	l.fragOff = align(l.fboxOff+size*(cacheLine+fboxSize), cacheLine)
	l.coopOff = align(l.fragOff+fragCount*l.fragStride, cacheLine)
	l.total = align(l.coopOff+coopRecs*coopRecSize, 4096)
	return l
}

// fbox returns the offset of the fast box that sender writes into: its
// control line (the receiver's read position) followed by the ring.
func (l *layout) fbox(sender int) int { return l.fboxOff + sender*(cacheLine+l.fboxSize) }

func (l *layout) frag(i int) int { return l.fragOff + i*l.fragStride }

func (l *layout) coop(i int) int { return l.coopOff + i*coopRecSize }

// segment is one mapped segment file, ours or a peer's.
type segment struct {
	mem  []byte
	lay  layout
	path string
}

func (s *segment) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[off])) }
func (s *segment) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

func (s *segment) state() uint32 { return atomic.LoadUint32(s.u32(offState)) }

// createSegment makes and maps the segment of rank. The file must not
// exist: job ids are unique, and a leftover of a crashed job with the same
// name is an error rather than something to trust.
func createSegment(path string, rank, pid int, lay layout) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sm: create segment: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(int64(lay.total)); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("sm: size segment %s to %d bytes: %w", path, lay.total, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, lay.total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("sm: map segment %s: %w", path, err)
	}
	s := &segment{mem: mem, lay: lay, path: path}
	*s.u64(offMagic) = segMagic
	*s.u32(offVersion) = segVersion
	*s.u32(offRank) = uint32(rank)
	*s.u32(offSize) = uint32(lay.size)
	*s.u32(offPid) = uint32(pid)
	*s.u32(offFboxSize) = uint32(lay.fboxSize)
	*s.u32(offFragCount) = uint32(lay.fragCount)
	*s.u32(offFragStride) = uint32(lay.fragStride)
	*s.u32(offFifoCells) = uint32(lay.fifoCells)
	*s.u32(offMaxFrame) = uint32(lay.maxFrame)
	*s.u64(offTotal) = uint64(lay.total)
	for i := range lay.fifoCells {
		*s.u64(lay.fifoOff + i*fifoCellSize) = uint64(i)
	}
	atomic.StoreUint32(s.u32(offState), stateReady)
	return s, nil
}

// openSegment maps the segment of a peer and checks that it is what the
// peer announced: the right magic, version, rank and job size, a ready
// owner, and a layout that fits in the file.
func openSegment(path string, rank, size int) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("sm: open segment of rank %d: %w", rank, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("sm: segment of rank %d: %w", rank, err)
	}
	n := int(st.Size())
	if n < ctrlSize {
		return nil, fmt.Errorf("sm: segment of rank %d is %d bytes, too short", rank, n)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("sm: map segment of rank %d: %w", rank, err)
	}
	s := &segment{mem: mem, path: path}
	if err := s.check(rank, size); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("sm: segment of rank %d (%s): %w", rank, path, err)
	}
	return s, nil
}

func (s *segment) check(rank, size int) error {
	if *s.u64(offMagic) != segMagic {
		return errors.New("not a gobtl sm segment")
	}
	if v := *s.u32(offVersion); v != segVersion {
		return fmt.Errorf("layout version %d, want %d", v, segVersion)
	}
	if st := s.state(); st != stateReady {
		return fmt.Errorf("owner state %d, not ready", st)
	}
	if r := int(*s.u32(offRank)); r != rank {
		return fmt.Errorf("belongs to rank %d", r)
	}
	if n := int(*s.u32(offSize)); n != size {
		return fmt.Errorf("made for %d ranks, job has %d", n, size)
	}
	fboxSize := int(*s.u32(offFboxSize))
	if fboxSize < 2*cacheLine || fboxSize&(fboxSize-1) != 0 {
		return fmt.Errorf("fast box size %d is not a power of two", fboxSize)
	}
	lay := newLayout(size, fboxSize, int(*s.u32(offFragCount)), int(*s.u32(offMaxFrame)))
	if lay.fragStride != int(*s.u32(offFragStride)) || lay.fifoCells != int(*s.u32(offFifoCells)) ||
		uint64(lay.total) != *s.u64(offTotal) || lay.total > len(s.mem) {
		return errors.New("inconsistent layout")
	}
	s.lay = lay
	return nil
}

func (s *segment) unmap() error {
	if s.mem == nil {
		return nil
	}
	err := unix.Munmap(s.mem)
	s.mem = nil
	return err
}
