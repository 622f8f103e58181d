package bench

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/gobtl/gobtl/pml"
)

// BenchmarkStackPipeline is the CPU cost (thread time, which other
// processes on the core do not inflate) of one rendezvous message through
// sm's copy pipeline, both ranks in one goroutine: both copies, every
// fragment's frame and pipeline step, and the handshake, for sm's default
// fragments and for a stack that sets max_send_size.
func BenchmarkStackPipeline(b *testing.B) {
	for _, slot := range []string{"", "32KiB", "64KiB", "128KiB"} {
		for _, size := range []int{64 << 10, 1 << 20, 4 << 20} {
			name := slot
			if name == "" {
				name = "default"
			}
			b.Run(fmt.Sprintf("%s/%dKiB", name, size>>10), func(b *testing.B) {
				params := map[string]string{}
				if slot != "" {
					params["max_send_size"] = slot
				}
				c := twoRanksWith(b, params, pml.Options{Protocol: pml.ProtoPipeline})
				sbuf, rbuf := make([]byte, size), make([]byte, size)
				one := func() {
					r, _ := c[1].Irecv(rbuf, 0, 1)
					s, _ := c[0].Isend(sbuf, 1, 1)
					for s != nil || r != nil {
						if s != nil {
							if ok, _, _ := c[0].Test(s); ok {
								s = nil
							}
						}
						if r != nil {
							if ok, _, _ := c[1].Test(r); ok {
								r = nil
							}
						}
					}
				}
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				one()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				t0 := msgtest.ThreadNS()
				for range b.N {
					one()
				}
				b.ReportMetric(float64(msgtest.ThreadNS()-t0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
