package coll_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gobtl/gobtl/coll"
)

// The sums with vector kernels must give the bits of the plain loop, for
// any length and any alignment of the vectors, including the floats'
// special values (NaNs, infinities, -0, subnormals), or a reduction would
// depend on which path a block took.

func TestSumsGiveTheBitsOfThePlainLoop(t *testing.T) {
	checkSum(t, func(r *rand.Rand) float32 { return specialF32[r.IntN(len(specialF32))] })
	checkSum(t, func(r *rand.Rand) float64 { return specialF64[r.IntN(len(specialF64))] })
	checkSum(t, func(r *rand.Rand) int32 { return int32(r.Uint32()) })
	checkSum(t, func(r *rand.Rand) uint32 { return r.Uint32() })
	checkSum(t, func(r *rand.Rand) int64 { return int64(r.Uint64()) })
	checkSum(t, func(r *rand.Rand) uint { return uint(r.Uint64()) })
	checkSum(t, func(r *rand.Rand) int16 { return int16(r.Uint32()) })
}

var specialF32 = []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1.5e-40, 3.4e38, -3.4e38,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0.1, 1e7, -2.5e-3}

var specialF64 = []float64{0, math.Copysign(0, -1), 1, -1, 5e-320, 1.7e308, -1.7e308,
	math.Inf(1), math.Inf(-1), math.NaN(), 0.1, 1e16, -2.5e-3}

func checkSum[T coll.Number](t *testing.T, gen func(*rand.Rand) T) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	op := coll.Sum[T]()
	for _, n := range []int{0, 1, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 300, 1029} {
		for off := range 3 { // elements in: the vectors' alignment changes
			a, b := make([]T, n+off), make([]T, n+off)
			for i := range a {
				a[i], b[i] = gen(r), gen(r)
			}
			want := slices.Clone(a)
			for i := range want {
				want[i] += b[i]
			}
			op.Fn.Combine(coll.Bytes(a[off:]), coll.Bytes(b[off:]))
			for i := range off {
				want[i] = a[i] // untouched before the vector
			}
			if got, w := coll.Bytes(a), coll.Bytes(want); !slices.Equal(got, w) {
				t.Fatalf("sum of %d %T at element %d: %v, want %v", n, a[0], off, a, want)
			}
		}
	}
}

func BenchmarkSum(b *testing.B) {
	const n = 512 << 10
	bench := func(name string, op coll.Op) {
		b.Run(name, func(b *testing.B) {
			x, y := make([]byte, n), make([]byte, n)
			b.SetBytes(n)
			for b.Loop() {
				op.Fn.Combine(x, y)
			}
		})
	}
	bench("float32", coll.Sum[float32]())
	bench("float64", coll.Sum[float64]())
	bench("int32", coll.Sum[int32]())
	bench("int64", coll.Sum[int64]())
	bench("int16", coll.Sum[int16]())
	bench(fmt.Sprint("max/float64"), coll.Max[float64]())
}
