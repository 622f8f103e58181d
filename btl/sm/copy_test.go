package sm

import (
	"bytes"
	"testing"
	"unsafe"
)

// copyOut moves every byte, by each of its ways (memmove below
// copyLinesMin, REP MOVSB, non-temporal stores with a tail), to aligned
// and unaligned destinations.
func TestCopyOutCopiesEveryByte(t *testing.T) {
	src := make([]byte, 70<<10+3)
	for i := range src {
		src[i] = byte(i*7 + i>>8)
	}
	buf := make([]byte, len(src)+128)
	base := (64 - int(uintptr(unsafe.Pointer(&buf[0])))&63) & 63
	for _, stream := range []bool{false, true} {
		for _, n := range []int{0, 1, 63, 2047, 2048, 2049, 4096, 32 << 10, 32<<10 + 17, 65472, 70 << 10} {
			for _, shift := range []int{0, 8, 32} {
				dst := buf[base+shift : base+shift+n]
				clear(buf)
				if got := copyOut(dst, src[3:3+n], stream); got != n {
					t.Fatalf("stream %v, %d bytes at +%d: copied %d", stream, n, shift, got)
				}
				if !bytes.Equal(dst, src[3:3+n]) {
					t.Fatalf("stream %v, %d bytes at +%d: wrong bytes", stream, n, shift)
				}
				if buf[base+shift+n] != 0 || (base+shift > 0 && buf[base+shift-1] != 0) {
					t.Fatalf("stream %v, %d bytes at +%d: wrote outside dst", stream, n, shift)
				}
			}
		}
	}
}
