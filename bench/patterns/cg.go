package patterns

import (
	"fmt"
	"math/bits"
)

// NPB CG, class A (see the package doc): na = 14000, 15 iterations after
// an untimed one, 25 CG steps each, on NPB's grid of ranks (cg.f's
// setup_proc_info and setup_submatrix_info).
const (
	cgRows  = 14000
	cgSteps = 25
)

var cgPattern = &Pattern{
	Name:        "cg",
	Doc:         "NPB CG: row-wise reduction exchanges with log2 partners and a transpose exchange on a 2D grid of ranks",
	ClassAIters: 16, DefaultIters: 5,
	gen: genCG,
}

// cgGrid is NPB CG's process grid and this rank's partners.
type cgGrid struct {
	rows, cols int
	reduce     []int // reduce_exch_proc, in order
	exch       int   // the transpose partner
	vec        int   // doubles per reduce or transpose message
}

func newCGGrid(n, me int) (cgGrid, error) {
	if n&(n-1) != 0 {
		return cgGrid{}, fmt.Errorf("needs a power-of-two number of ranks, as NPB CG does; the job has %d", n)
	}
	l2 := bits.Len(uint(n)) - 1
	g := cgGrid{cols: 1 << ((l2 + 1) / 2)}
	g.rows = n / g.cols
	row, col := me/g.cols, me%g.cols
	for div := g.cols; div > 1; div /= 2 {
		g.reduce = append(g.reduce, row*g.cols+(col^div/2))
	}
	g.vec = cgRows / g.rows
	if g.rows == g.cols {
		g.exch = col*g.cols + row
	} else {
		g.exch = 2*((col/2%g.rows)*g.rows+row) + col%2
		g.vec /= 2
	}
	return g, nil
}

func genCG(r *run) error {
	g, err := newCGGrid(r.n, r.me)
	if err != nil {
		return fmt.Errorf("patterns: cg: %w", err)
	}
	vec := r.scaled(8 * g.vec)
	matvec := func() error {
		r.spin() // the local sparse product
		for _, p := range g.reduce {
			if err := r.exchange(p, vec, vec); err != nil {
				return err
			}
		}
		if len(g.reduce) > 0 {
			return r.exchange(g.exch, vec, vec)
		}
		return nil
	}
	dot := func(doubles int) error {
		r.spin()
		for _, p := range g.reduce {
			if err := r.exchange(p, 8*doubles, 8*doubles); err != nil {
				return err
			}
		}
		return nil
	}
	for it := range r.iters {
		r.at("conj_grad", it)
		if err := dot(1); err != nil { // rho = r·r
			return err
		}
		for range cgSteps {
			if err := matvec(); err != nil { // q = A·p
				return err
			}
			if err := dot(1); err != nil { // p·q
				return err
			}
			if err := dot(1); err != nil { // rho = r·r
				return err
			}
		}
		if err := matvec(); err != nil { // residual: A·z
			return err
		}
		if err := dot(1); err != nil {
			return err
		}
		r.at("norms", it)
		if err := dot(2); err != nil { // x·z and z·z
			return err
		}
	}
	return nil
}
