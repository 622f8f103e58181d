package bench

import "testing"

// The 99th percentile is the nearest rank's: of 200 iterations the 198th
// smallest, of 100 the 99th, of 50 the largest, of one that one.
func TestSpreadsP99IsTheNearestRanks(t *testing.T) {
	for n, want := range map[int]float64{200: 198, 100: 99, 50: 50, 1: 1, 101: 100} {
		vs := make([]float64, n)
		for i := range vs {
			vs[(i*7)%n] = float64(i + 1) // 1..n, out of order
		}
		if n%7 == 0 {
			t.Fatalf("pick an n prime to 7, not %d", n)
		}
		f := spread("x", vs)
		if len(f) != 4 || f[2].Name != "x_p99" || f[2].Value != want || f[0].Value != 1 || f[3].Value != float64(n) {
			t.Errorf("n=%d: %v, want p99 %v", n, f, want)
		}
	}
}
