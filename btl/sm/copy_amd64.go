package sm

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func copyLines(dst, src *byte, n uintptr)

//go:noescape
func copyStream(dst, src *byte, n uintptr)

// repMovsb is true where REP MOVSB is the fast way to copy (ERMS).
var repMovsb = cpu.X86.HasERMS

// canStream is true where copyStream's AVX2 stores work.
var canStream = cpu.X86.HasAVX2

// copyOut copies src into dst (shared memory a peer will read) and
// returns the bytes copied. Large copies use REP MOVSB, which writes whole
// lines without fetching them from the peer's cache first; Go's memmove
// uses vector stores there, each line costing a read-for-ownership. With
// stream (copy_in = "stream") they use non-temporal stores, which bypass
// the caches: the reader then reads from memory.
func copyOut(dst, src []byte, stream bool) int {
	n := min(len(dst), len(src))
	if stream && n >= copyLinesMin && canStream && uintptr(unsafe.Pointer(unsafe.SliceData(dst)))&31 == 0 {
		whole := n &^ 63
		copyStream(unsafe.SliceData(dst), unsafe.SliceData(src), uintptr(whole))
		copy(dst[whole:n], src[whole:n])
		return n
	}
	if n >= copyLinesMin && repMovsb {
		copyLines(unsafe.SliceData(dst), unsafe.SliceData(src), uintptr(n))
		return n
	}
	return copy(dst, src)
}

// copyLinesMin is where REP MOVSB's start-up cost is paid back.
const copyLinesMin = 2048
