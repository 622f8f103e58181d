package coll

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX2 kernels of add_amd64.s: dst[i] += src[i] over n bytes, n a
// multiple of 32.
//
//go:noescape
func addPS(dst, src *byte, n uintptr)

//go:noescape
func addPD(dst, src *byte, n uintptr)

//go:noescape
func addD(dst, src *byte, n uintptr)

//go:noescape
func addQ(dst, src *byte, n uintptr)

var hasAVX2 = cpu.X86.HasAVX2

// vadd adds the whole 32-byte lanes of in into inout with kernel k and
// returns the bytes it did (none without AVX2).
func vadd(k kernel, inout, in []byte) int {
	n := min(len(inout), len(in)) &^ 31
	if n == 0 || !hasAVX2 {
		return 0
	}
	d, s := unsafe.SliceData(inout), unsafe.SliceData(in)
	switch k {
	case vaddF32:
		addPS(d, s, uintptr(n))
	case vaddF64:
		addPD(d, s, uintptr(n))
	case vaddI32:
		addD(d, s, uintptr(n))
	default:
		addQ(d, s, uintptr(n))
	}
	return n
}
