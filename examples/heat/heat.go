package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"time"
	"unsafe"

	"github.com/gobtl/gobtl"
)

// Params describe one solve.
type Params struct {
	N        int     // interior points per side; the grid has N+2 with its edges
	MaxIters int     // iterations at most
	Tol      float64 // stop once no point changes by more than this
}

// Result is a solve's outcome. Grid is the whole (N+2)² grid, edges
// included, row by row — on rank 0 only for the parallel solve.
type Result struct {
	Grid     []float64
	Iters    int
	Residual float64
	Elapsed  time.Duration
}

// Hot is the temperature of the top edge; the other edges are at 0.
const Hot = 1.0

// Message tags of the halo exchange: a row travelling up, a row going down.
const (
	tagUp   = 1
	tagDown = 2
)

// band is the interior rows [lo, hi) of the grid that rank r of p owns.
func band(n, p, r int) (lo, hi int) {
	return 1 + r*n/p, 1 + (r+1)*n/p
}

// relax does one Jacobi sweep over rows 1..rows of src into dst, both
// rows+2 rows of width points, and returns the largest change. The serial
// and the parallel solve both call it, so that every point gets the same
// arithmetic whatever the decomposition.
func relax(dst, src []float64, rows, width int) float64 {
	res := 0.0
	for i := 1; i <= rows; i++ {
		up, row, down := src[(i-1)*width:i*width], src[i*width:(i+1)*width], src[(i+1)*width:(i+2)*width]
		out := dst[i*width : (i+1)*width]
		for j := 1; j < width-1; j++ {
			v := 0.25 * ((up[j] + down[j]) + (row[j-1] + row[j+1]))
			res = math.Max(res, math.Abs(v-row[j]))
			out[j] = v
		}
	}
	return res
}

// Solve runs the parallel solve on every rank of c and gathers the grid
// to rank 0.
func Solve(c *gobtl.Comm, p Params) (Result, error) {
	if p.N < c.Size() {
		return Result{}, fmt.Errorf("heat: %d rows cannot go to %d ranks", p.N, c.Size())
	}
	s := newSlab(c, p.N)
	res := []float64{0}
	if err := c.Barrier(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	iters := 0
	for iters < p.MaxIters {
		if err := s.exchangeHalos(); err != nil {
			return Result{}, err
		}
		res[0] = s.sweep()
		iters++
		if err := gobtl.Allreduce(c, res, res, gobtl.Max); err != nil {
			return Result{}, err
		}
		if res[0] < p.Tol {
			break
		}
	}
	grid, err := s.gather()
	if err != nil {
		return Result{}, err
	}
	elapsed := time.Since(start)
	if c.Rank() == 0 {
		for j := range s.w {
			grid[j] = Hot
		}
	}
	return Result{Grid: grid, Iters: iters, Residual: res[0], Elapsed: elapsed}, nil
}

// slab is one rank's band of the plate: two copies of its rows, each with
// a halo row above and below (on the first and last rank the halo is the
// fixed edge), u the current one.
type slab struct {
	c        *gobtl.Comm
	n, w     int // interior points per side; points per row
	rows     int // the band's interior rows
	u, v     []float64
	up, down int // the ranks of the bands above and below
	reqs     []*gobtl.Request
}

// newSlab allocates this rank's band of the n×n interior.
func newSlab(c *gobtl.Comm, n int) *slab {
	me := c.Rank()
	lo, hi := band(n, c.Size(), me)
	s := &slab{c: c, n: n, w: n + 2, rows: hi - lo, up: me - 1, down: me + 1, reqs: make([]*gobtl.Request, 0, 4)}
	s.u, s.v = make([]float64, (s.rows+2)*s.w), make([]float64, (s.rows+2)*s.w)
	if me == 0 {
		for j := range s.w {
			s.u[j], s.v[j] = Hot, Hot
		}
	}
	return s
}

// exchangeHalos sends the band's first row to the rank above and its last
// to the rank below, and receives theirs into the halo rows.
func (s *slab) exchangeHalos() error {
	c, u, w, rows := s.c, s.u, s.w, s.rows
	s.reqs = s.reqs[:0]
	if s.up >= 0 {
		if err := s.post(c.Irecv(bytesOf(u[:w]), s.up, tagDown)); err != nil {
			return err
		}
		if err := s.post(c.Isend(bytesOf(u[w:2*w]), s.up, tagUp)); err != nil {
			return err
		}
	}
	if s.down < c.Size() {
		if err := s.post(c.Irecv(bytesOf(u[(rows+1)*w:]), s.down, tagUp)); err != nil {
			return err
		}
		if err := s.post(c.Isend(bytesOf(u[rows*w:(rows+1)*w]), s.down, tagDown)); err != nil {
			return err
		}
	}
	return c.Waitall(s.reqs, nil)
}

// post keeps a request of the halo exchange to wait for.
func (s *slab) post(r *gobtl.Request, err error) error {
	s.reqs = append(s.reqs, r)
	return err
}

// sweep relaxes the band once and returns its largest change.
func (s *slab) sweep() float64 {
	res := relax(s.v, s.u, s.rows, s.w)
	s.u, s.v = s.v, s.u
	return res
}

// gather puts every band's rows in their place in rank 0's grid and
// returns that grid there (its top edge not yet set), nil elsewhere.
func (s *slab) gather() ([]float64, error) {
	c, w := s.c, s.w
	var grid []float64
	var counts, displs []int
	if c.Rank() == 0 {
		size := c.Size()
		grid = make([]float64, w*w)
		counts, displs = make([]int, size), make([]int, size)
		for r := range size {
			l, h := band(s.n, size, r)
			counts[r], displs[r] = (h-l)*w, l*w
		}
	}
	if err := gobtl.Gatherv(c, s.u[w:(s.rows+1)*w], grid, counts, displs, 0); err != nil {
		return nil, err
	}
	return grid, nil
}

// SolveSerial solves the same plate in one piece.
func SolveSerial(p Params) Result {
	w := p.N + 2
	u, v := make([]float64, w*w), make([]float64, w*w)
	for j := range w {
		u[j], v[j] = Hot, Hot
	}
	start := time.Now()
	iters, res := 0, 0.0
	for iters < p.MaxIters {
		res = relax(v, u, p.N, w)
		u, v = v, u
		iters++
		if res < p.Tol {
			break
		}
	}
	return Result{Grid: u, Iters: iters, Residual: res, Elapsed: time.Since(start)}
}

// Compare checks that the parallel result is the serial one, bit for bit.
func Compare(par, ser Result) error {
	if par.Iters != ser.Iters {
		return fmt.Errorf("heat: parallel solve took %d iterations, serial %d", par.Iters, ser.Iters)
	}
	if len(par.Grid) != len(ser.Grid) {
		return fmt.Errorf("heat: parallel grid of %d points, serial %d", len(par.Grid), len(ser.Grid))
	}
	for i := range par.Grid {
		if math.Float64bits(par.Grid[i]) != math.Float64bits(ser.Grid[i]) {
			w := int(math.Sqrt(float64(len(par.Grid))))
			return fmt.Errorf("heat: point (%d, %d) is %v in parallel, %v serially", i/w, i%w, par.Grid[i], ser.Grid[i])
		}
	}
	return nil
}

// WritePNG writes the w×w grid as an image, cold blue to hot red.
func WritePNG(path string, grid []float64, w int) error {
	img := image.NewRGBA(image.Rect(0, 0, w, w))
	for i := range w {
		for j := range w {
			img.Set(j, i, heatColor(grid[i*w+j]/Hot))
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heat: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("heat: %s: %w", path, err)
	}
	return f.Close()
}

// heatColor maps t in [0, 1] to blue, through green, to red.
func heatColor(t float64) color.RGBA {
	t = math.Max(0, math.Min(1, t))
	// A power curve spreads the thin hot layer near the edge over more
	// of the palette.
	t = math.Pow(t, 0.35)
	return color.RGBA{R: uint8(255 * t), G: uint8(255 * 4 * t * (1 - t)), B: uint8(255 * (1 - t)), A: 255}
}

// bytesOf is the memory of f as bytes, which is what gobtl's point-to-point
// calls move: no copy, so the halo rows go straight from the grid.
func bytesOf(f []float64) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), len(f)*8)
}
