package shm

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/internal/jobfile"
)

// line is the unit of layout: words that different ranks write never
// share a cache line.
const line = 64

const (
	segMagic   = 0x316c6c6f636d6873 // "shmcoll1"
	segVersion = 1
)

// The header: line 0 is written once by the leader before it hands out
// the name; line 1 is the broken word, which any rank sets when a
// collective fails on it so that the others fail too.
const (
	hMagic   = 0  // u64
	hVersion = 8  // u32
	hRanks   = 12 // u32
	hSmall   = 16 // u32
	hChunk   = 20 // u32
	hDepth   = 24 // u32
	hTotal   = 32 // u64
	hBroken  = line
	hSize    = 2 * line
)

// The lines of a rank's counters, each written by that rank alone: done
// is the last collective it finished; fill, red and take count the chunk
// steps (chunk.go) whose data it has copied in, whose share it has
// reduced, and whose data it has finished reading.
const (
	cDone = iota * line
	cFill
	cRed
	cTake
	cSize
)

// A slot is a flag line with its data: the collective's sequence number
// (u64, stored last), the bytes the rank put in it (u64), then the data,
// whose first 48 bytes share the flag's line.
const (
	sSeq  = 0
	sLen  = 8
	sData = 16
)

// layout is where everything is in a segment of n ranks: per rank its
// counters, two generations of an up slot (fan-in) and a down slot
// (fan-out), and depth chunks of its own; then depth result chunks that
// all ranks write a share of.
type layout struct {
	n, small, chunk, depth int
	slot                   int // bytes of one slot, whole lines
	rankOff, rankSize      int
	areaOff                int // a rank's chunks, within its part
	resultOff              int
	total                  int
}

func newLayout(n, small, chunk, depth int) layout {
	l := layout{n: n, small: small, chunk: chunk, depth: depth}
	l.slot = align(sData+small, line)
	l.rankOff = hSize
	l.areaOff = align(cSize+4*l.slot, line)
	l.rankSize = align(l.areaOff+depth*chunk, line)
	l.resultOff = l.rankOff + n*l.rankSize
	l.total = align(l.resultOff+depth*chunk, 4096)
	return l
}

func align(n, a int) int { return (n + a - 1) &^ (a - 1) }

// segment is one node's segment as this rank maps it.
type segment struct {
	mem  []byte
	lay  layout
	path string // "" once unlinked
}

func (s *segment) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

func (s *segment) rank(r int) int { return s.lay.rankOff + r*s.lay.rankSize }

// counter is rank r's counter c (cDone, cFill, ...).
func (s *segment) counter(r, c int) *uint64 { return s.u64(s.rank(r) + c) }

// up and down are the offsets of rank r's slots of generation g.
func (s *segment) up(r, g int) int   { return s.rank(r) + cSize + g*s.lay.slot }
func (s *segment) down(r, g int) int { return s.rank(r) + cSize + (2+g)*s.lay.slot }

// data is the first n bytes of the data of the slot at off.
func (s *segment) data(off, n int) []byte { return s.mem[off+sData : off+sData+n : off+sData+n] }

// area is chunk j of rank r's chunks; result is result chunk j.
func (s *segment) area(r, j int) []byte {
	o := s.rank(r) + s.lay.areaOff + j*s.lay.chunk
	return s.mem[o : o+s.lay.chunk : o+s.lay.chunk]
}

func (s *segment) result(j int) []byte {
	o := s.lay.resultOff + j*s.lay.chunk
	return s.mem[o : o+s.lay.chunk : o+s.lay.chunk]
}

func (s *segment) broken() uint64 { return atomic.LoadUint64(s.u64(hBroken)) }

// breakWith marks the segment broken with why (a brokenX code), unless
// it is already.
func (s *segment) breakWith(why uint64) { atomic.CompareAndSwapUint64(s.u64(hBroken), 0, why) }

// createSegment makes and maps a new segment file in dir, named prefix
// + "coll-" + 16 random hex digits (internal/jobfile: created
// exclusively, without following a link, mode 0600, checked with fstat,
// its pages reserved at once — on a full /dev/shm that is an error here,
// not a SIGBUS on a page touched later).
func createSegment(dir, prefix string, lay layout) (*segment, error) {
	f, err := jobfile.Create(dir, prefix+"coll-", "", int64(lay.total))
	if err != nil {
		return nil, fmt.Errorf("coll/shm: segment: %w", err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, lay.total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("coll/shm: map %s: %w", f.Name(), err)
	}
	s := &segment{mem: mem, lay: lay, path: f.Name()}
	*s.u64(hTotal) = uint64(lay.total)
	s.put32(hVersion, segVersion)
	s.put32(hRanks, lay.n)
	s.put32(hSmall, lay.small)
	s.put32(hChunk, lay.chunk)
	s.put32(hDepth, lay.depth)
	atomic.StoreUint64(s.u64(hMagic), segMagic)
	return s, nil
}

// name is the segment's file name, which the leader sends the others.
func (s *segment) name() string { return filepath.Base(s.path) }

// validName accepts the names createSegment makes with prefix: a plain
// file name, never a path.
func validName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix+"coll-")
	if !ok || len(rest) != 16 || strings.ContainsAny(prefix, "/\x00") {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// attachSegment maps the segment the leader made and checks that it is
// one: a file of this user's alone (jobfile.Open) of the size lay says,
// whose header the leader filled in for lay.
func attachSegment(dir, name, prefix string, lay layout) (*segment, error) {
	if !validName(name, prefix) {
		return nil, fmt.Errorf("coll/shm: %q is not a segment name", name)
	}
	path := filepath.Join(dir, name)
	f, err := jobfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("coll/shm: segment: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != int64(lay.total) {
		return nil, fmt.Errorf("coll/shm: %s: not %d bytes (%v)", path, lay.total, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, lay.total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("coll/shm: map %s: %w", path, err)
	}
	s := &segment{mem: mem, lay: lay}
	if err := s.check(); err != nil {
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("coll/shm: %s: %w", path, err)
	}
	return s, nil
}

func (s *segment) put32(off, v int) { *(*uint32)(unsafe.Pointer(&s.mem[off])) = uint32(v) }

func (s *segment) check() error {
	u32 := func(off int) int { return int(*(*uint32)(unsafe.Pointer(&s.mem[off]))) }
	l := s.lay
	switch {
	case atomic.LoadUint64(s.u64(hMagic)) != segMagic:
		return errors.New("not a collective segment")
	case u32(hVersion) != segVersion:
		return fmt.Errorf("layout version %d, want %d", u32(hVersion), segVersion)
	case u32(hRanks) != l.n || u32(hSmall) != l.small || u32(hChunk) != l.chunk || u32(hDepth) != l.depth ||
		*s.u64(hTotal) != uint64(l.total):
		return fmt.Errorf("made for %d ranks, %d-byte slots, %d chunks of %d bytes: this rank expects %d, %d, %d of %d",
			u32(hRanks), u32(hSmall), u32(hDepth), u32(hChunk), l.n, l.small, l.depth, l.chunk)
	}
	return nil
}

// unlink removes the segment's name; the ranks that mapped it keep it.
func (s *segment) unlink() error {
	if s.path == "" {
		return nil
	}
	err := os.Remove(s.path)
	s.path = ""
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("coll/shm: unlink: %w", err)
	}
	return nil
}

func (s *segment) unmap() {
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem = nil
	}
}
