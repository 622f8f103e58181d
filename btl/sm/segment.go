package sm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/jobfile"
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

// createSegment makes and maps the segment of rank in dir, under the name
// prefix followed by a random part (jobfile.Create): a file nobody else
// made, can open or could have guessed the name of, whose pages are
// reserved, so that a tmpfs without room for it is an error here rather
// than a SIGBUS at the first write to a page it cannot supply. Peers
// learn the name through the bootstrap (blob.Path).
func createSegment(dir, prefix string, rank, pid int, lay layout) (*segment, error) {
	f, err := jobfile.Create(dir, prefix, "", int64(lay.total))
	if err != nil {
		return nil, fmt.Errorf("sm: create the %d-byte segment of rank %d: %w", lay.total, rank, err)
	}
	defer f.Close()
	path := f.Name()
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
// peer announced: a file of this user that nobody else may open, reached
// through no link (jobfile.Open), with the right magic, version, rank and
// job size, a ready owner, and a layout that fits in the file.
func openSegment(path string, rank, size int) (*segment, error) {
	f, err := jobfile.Open(path)
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
	lay, err := s.peerLayout(size)
	if err != nil {
		return err
	}
	s.lay = lay
	return nil
}

// Bounds on a peer's layout fields, from the parameters' own (config.go):
// each is checked before any of them is multiplied, so that a hostile or
// torn control block cannot make the layout wrap around.
const (
	maxFboxSize = 64 << 20
	maxFrags    = 65536
	maxFrameLen = core.HeaderSize + 64<<20
)

// peerLayout is the layout a peer's control block describes, if it is
// one this rank can trust: every field in its range, every part inside
// the file.
func (s *segment) peerLayout(size int) (layout, error) {
	fboxSize := int64(*s.u32(offFboxSize))
	frags := int64(*s.u32(offFragCount))
	maxFrame := int64(*s.u32(offMaxFrame))
	switch {
	case fboxSize < 2*cacheLine || fboxSize > maxFboxSize || fboxSize&(fboxSize-1) != 0:
		return layout{}, fmt.Errorf("fast box size %d is not a power of two up to %d", fboxSize, maxFboxSize)
	case frags < 1 || frags > maxFrags:
		return layout{}, fmt.Errorf("%d fragments, want 1 to %d", frags, maxFrags)
	case maxFrame < core.HeaderSize || maxFrame > maxFrameLen:
		return layout{}, fmt.Errorf("largest frame %d bytes, want %d to %d", maxFrame, core.HeaderSize, maxFrameLen)
	}
	// An upper bound of the layout's size in 64-bit arithmetic: newLayout
	// computes it in int, 32 bits on 386.
	bound := ctrlSize + int64(size)*(4+cacheLine+fboxSize) + fifoCellSize*max(int64(size)*frags, 64)*2 +
		frags*(fragHdr+2*cacheLine+maxFrame) + coopRecs*coopRecSize + 5*4096
	if bound > int64(math.MaxInt) {
		return layout{}, fmt.Errorf("a layout of up to %d bytes is more than this process can map", bound)
	}
	lay := newLayout(size, int(fboxSize), int(frags), int(maxFrame))
	if lay.fragStride != int(*s.u32(offFragStride)) || lay.fifoCells != int(*s.u32(offFifoCells)) ||
		uint64(lay.total) != *s.u64(offTotal) || lay.total > len(s.mem) {
		return layout{}, errors.New("inconsistent layout")
	}
	return lay, nil
}

func (s *segment) unmap() error {
	if s.mem == nil {
		return nil
	}
	err := unix.Munmap(s.mem)
	s.mem = nil
	return err
}
