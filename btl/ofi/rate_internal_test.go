//go:build ofi && cgo

package ofi

import (
	"os"
	"strconv"
	"testing"

	"github.com/gobtl/gobtl/core"
)

// BenchmarkEagerRate is the eager path's cost per 8-byte frame between
// two modules in this process: windows of 64 frames from rank 0 to rank
// 1, each delivered before the next window starts (as bench msgrate
// does), both modules progressed by this goroutine.
func BenchmarkEagerRate(b *testing.B) {
	for _, prov := range providersHere {
		b.Run(prov, func(b *testing.B) {
			j := openTestJob(b, prov, 2, benchParams)
			got := 0
			j.mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { got++ })
			ep := j.ep(0, 1)
			h := core.Header{Type: core.TypeUserBase, Tag: 7}
			data := make([]byte, benchBytes)
			const window = 64
			j.until("the session up", func() bool { return j.mods[0].peers[1].tx == txUp })
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += window {
				want := got + min(window, b.N-i)
				for k := i; k < i+window && k < b.N; k++ {
					for ep.Send(h, nil, data, 0) != nil {
						j.progress()
					}
				}
				for got < want {
					j.progress()
				}
			}
		})
	}
}

// benchBytes is the frames' payload: 8 bytes, or OFI_BENCH_BYTES (a
// size above the first class's buffers takes a tagged class).
var benchBytes = func() int {
	n, err := strconv.Atoi(os.Getenv("OFI_BENCH_BYTES"))
	if err != nil {
		return 8
	}
	return n
}()

var benchParams = func() map[string]string {
	if q := os.Getenv("OFI_BENCH_QUEUES"); q != "" {
		return map[string]string{"receive_queues": q, "eager_limit": "1KiB"}
	}
	return nil
}()
