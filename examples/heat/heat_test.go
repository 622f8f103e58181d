package main

import (
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtl/gobtl"
)

// TestTheParallelSolveIsTheSerialOne runs the solver on 1 to 4 in-process
// ranks (bands of equal and unequal height) and compares rank 0's grid
// with the serial solve, bit for bit.
func TestTheParallelSolveIsTheSerialOne(t *testing.T) {
	p := Params{N: 24, MaxIters: 4000, Tol: 1e-4}
	ser := SolveSerial(p)
	if ser.Iters < 10 || ser.Iters == p.MaxIters || ser.Residual >= p.Tol {
		t.Fatalf("serial solve: %d iterations, residual %g: the test does not exercise convergence", ser.Iters, ser.Residual)
	}
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			err := gobtl.RunLocal(context.Background(), n, gobtl.Options{}, func(c *gobtl.Comm) error {
				r, err := Solve(c, p)
				if err != nil || c.Rank() != 0 {
					return err
				}
				return Compare(r, ser)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTheFieldIsPhysical: the plate is warmest near the hot edge and
// cools monotonically away from it down the middle column, and it is
// symmetric left to right.
func TestTheFieldIsPhysical(t *testing.T) {
	p := Params{N: 21, MaxIters: 5000, Tol: 1e-7}
	g, w := SolveSerial(p).Grid, p.N+2
	mid := w / 2
	for i := 1; i < w-1; i++ {
		if !(g[i*w+mid] < g[(i-1)*w+mid]) {
			t.Fatalf("row %d of the middle column is %v, not below row %d's %v", i, g[i*w+mid], i-1, g[(i-1)*w+mid])
		}
		for j := range w {
			if d := g[i*w+j] - g[i*w+w-1-j]; d > 1e-12 || d < -1e-12 {
				t.Fatalf("(%d, %d) and its mirror differ by %g", i, j, d)
			}
		}
	}
}

func TestWritePNGWritesTheGrid(t *testing.T) {
	p := Params{N: 14, MaxIters: 100, Tol: 1e-3}
	path := filepath.Join(t.TempDir(), "heat.png")
	if err := WritePNG(path, SolveSerial(p).Grid, p.N+2); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != p.N+2 || b.Dy() != p.N+2 {
		t.Fatalf("image %v, want %d×%d", b, p.N+2, p.N+2)
	}
	top, _, _, _ := img.At(5, 0).RGBA()
	bottom, _, _, _ := img.At(5, p.N+1).RGBA()
	if top <= bottom {
		t.Fatalf("the hot edge is no redder than the cold one (%d, %d)", top, bottom)
	}
}
