package sm

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gobtl/gobtl/internal/msgtest"
)

// BenchmarkCopyIn copies a fragment's worth from a user buffer (walked
// through: in L2, or beyond it) into a fragment of the segment, by Go's
// memmove and by copyLines (REP MOVSB), reporting the thread's CPU time
// per copy (cpu-ns/op), which a loaded machine inflates less than the wall
// clock. One core only: what REP MOVSB saves when the peer's core holds
// the fragment's lines needs two processes (gobtl bench bw).
func BenchmarkCopyIn(b *testing.B) {
	if !repMovsb {
		b.Skip("no ERMS: copyOut uses memmove")
	}
	mods, _ := openRanks(b, 1, nil)
	frag := mods[0].seg.mem[mods[0].seg.lay.frag(0)+fragHdr:]
	for _, n := range []int{16 << 10, 32 << 10, 60 << 10} {
		for _, span := range []int{256 << 10, 4 << 20} {
			src := make([]byte, span+n)
			for _, kind := range []string{"memmove", "repmovsb"} {
				b.Run(fmt.Sprintf("%dKiB/src%dKiB/%s", n>>10, span>>10, kind), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					off := 0
					b.SetBytes(int64(n))
					t0 := msgtest.ThreadNS()
					for b.Loop() {
						s, d := src[off:off+n], frag[:n]
						if kind == "memmove" {
							copy(d, s)
						} else {
							copyLines(unsafe.SliceData(d), unsafe.SliceData(s), uintptr(n))
						}
						off = (off + n) % span
					}
					b.ReportMetric(float64(msgtest.ThreadNS()-t0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
