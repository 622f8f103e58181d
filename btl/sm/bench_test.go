package sm

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

// benchSendRecv sends one n-byte frame and delivers it, in one goroutine:
// the module's own cost per frame, without the PML and without the other
// process.
func benchSendRecv(b *testing.B, n int, params map[string]string) {
	mods, _ := openRanks(b, 2, params)
	got := 0
	mods[1].Register(core.TypeEager, func(*core.Header, []byte) { got++ })
	ep, _ := mods[0].Endpoint(1)
	data := make([]byte, n)
	h := core.Header{Type: core.TypeEager, Src: 0}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for ep.Send(h, nil, data, 0) != nil {
			mods[1].Progress()
			mods[0].Progress()
		}
		for want := got + 1; got < want; {
			mods[1].Progress()
		}
	}
}

func BenchmarkSendRecv8B(b *testing.B)   { benchSendRecv(b, 8, nil) }
func BenchmarkSendRecv1KiB(b *testing.B) { benchSendRecv(b, 1024, nil) }
func BenchmarkSendRecv32KiB(b *testing.B) {
	benchSendRecv(b, 32<<10-core.HeaderSize, nil)
}

// BenchmarkProgressIdle is the cost of polling with nothing to deliver.
func BenchmarkProgressIdle(b *testing.B) {
	mods, _ := openRanks(b, 4, nil)
	mods[0].Register(core.TypeEager, func(*core.Header, []byte) {})
	for r := 1; r < 4; r++ {
		ep, _ := mods[r].Endpoint(0)
		ep.Send(core.Header{Type: core.TypeEager, Src: int32(r)}, nil, nil, 0)
	}
	for mods[0].Progress() > 0 {
	}
	b.ReportAllocs()
	for b.Loop() {
		mods[0].Progress()
	}
}

func benchGet(b *testing.B, n int) {
	mods, _ := openRanks(b, 2, map[string]string{"single_copy": "cma"})
	remote := make([]byte, n)
	for i := range remote {
		remote[i] = byte(i)
	}
	rg, _ := mods[1].RegisterMem(remote, core.AccessRemoteRead)
	local := make([]byte, n)
	done := &countDone{}
	op := &core.RDMAOp{Local: local, Remote: rg.Key(), Done: done}
	ep, _ := mods[0].Endpoint(1)
	rdma := ep.(core.RDMA)
	b.SetBytes(int64(n))
	for b.Loop() {
		want := done.n + 1
		rdma.Get(op)
		for done.n < want { // a read from both ends takes a Progress a chunk
			mods[0].Progress()
		}
	}
}

func BenchmarkGet64KiB(b *testing.B) { benchGet(b, 64<<10) }
func BenchmarkGet1MiB(b *testing.B)  { benchGet(b, 1<<20) }
func BenchmarkGet4MiB(b *testing.B)  { benchGet(b, 4<<20) }

func BenchmarkMemmove1MiB(b *testing.B) {
	src, dst := make([]byte, 1<<20), make([]byte, 1<<20)
	b.SetBytes(1 << 20)
	for b.Loop() {
		copy(dst, src)
	}
}
func BenchmarkMemmove4MiB(b *testing.B) {
	src, dst := make([]byte, 4<<20), make([]byte, 4<<20)
	b.SetBytes(4 << 20)
	for b.Loop() {
		copy(dst, src)
	}
}
