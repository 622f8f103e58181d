package sm

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func copyLines(dst, src *byte, n uintptr)

// repMovsb is true where REP MOVSB is the fast way to copy (ERMS).
var repMovsb = cpu.X86.HasERMS

// copyOut copies src into dst (shared memory a peer will read) and
// returns the bytes copied. Large copies use REP MOVSB, which writes whole
// lines without fetching them from the peer's cache first; Go's memmove
// uses vector stores there, each line costing a read-for-ownership.
func copyOut(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n >= copyLinesMin && repMovsb {
		copyLines(unsafe.SliceData(dst), unsafe.SliceData(src), uintptr(n))
		return n
	}
	return copy(dst, src)
}

// copyLinesMin is where REP MOVSB's start-up cost is paid back.
const copyLinesMin = 2048
