package patterns

import (
	"fmt"

	"github.com/gobtl/gobtl/bench"
	"slices"
	"time"
)

// Pattern is one generator.
type Pattern struct {
	// Name is the NPB benchmark's name in lower case ("lu").
	Name string
	// Doc says in one line what the pattern does.
	Doc string
	// ClassAIters is the number of time steps of NPB class A's whole
	// program, its untimed warm-up step included (what seed 000's Table 1
	// counted).
	ClassAIters int
	// DefaultIters keeps a run on 8 ranks over a software InfiniBand
	// device (softrc) to a few seconds with class A's message sizes.
	DefaultIters int
	gen          func(r *run) error
}

// all are the patterns, in the order of seed 000's Table 1.
var all = []*Pattern{isPattern, ftPattern, luPattern, cgPattern, mgPattern, btPattern, spPattern}

// Lookup returns the pattern called name.
func Lookup(name string) (*Pattern, bool) {
	i := slices.IndexFunc(all, func(p *Pattern) bool { return p.Name == name })
	if i < 0 {
		return nil, false
	}
	return all[i], true
}

// Names lists the patterns in the order of seed 000's Table 1.
func Names() []string {
	names := make([]string, len(all))
	for i, p := range all {
		names[i] = p.Name
	}
	return names
}

// Run runs the pattern called name on every rank of c; every rank must
// call it with the same options. It returns this rank's stats once the
// pattern has ended and every connection has been checked for lost and
// duplicated messages.
func Run(c bench.Comm, name string, o Options) (*Stats, error) {
	p, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("patterns: no pattern %q (have %v)", name, Names())
	}
	return p.Run(c, o)
}

// Run runs p on every rank of c; see the package function Run.
func (p *Pattern) Run(c bench.Comm, o Options) (*Stats, error) {
	r, err := newRun(c, p, o)
	if err != nil {
		return nil, err
	}
	if err := c.Barrier(); err != nil {
		return nil, fmt.Errorf("patterns: %s: barrier: %w", p.Name, err)
	}
	t0 := time.Now()
	if err := p.gen(r); err != nil {
		return nil, err
	}
	r.st.Elapsed = time.Since(t0)
	if err := r.finish(); err != nil {
		return nil, err
	}
	return r.st, nil
}

// The generators, one function per NPB benchmark.

// IS runs the IS pattern (integer sort: alltoall + alltoallv).
func IS(c bench.Comm, o Options) (*Stats, error) { return isPattern.Run(c, o) }

// FT runs the FT pattern (3D FFT: alltoall transposes).
func FT(c bench.Comm, o Options) (*Stats, error) { return ftPattern.Run(c, o) }

// CG runs the CG pattern (row reductions and transpose exchanges on a 2D
// grid of ranks).
func CG(c bench.Comm, o Options) (*Stats, error) { return cgPattern.Run(c, o) }

// MG runs the MG pattern (3D halo exchanges over a V-cycle).
func MG(c bench.Comm, o Options) (*Stats, error) { return mgPattern.Run(c, o) }

// LU runs the LU pattern (SSOR wavefront pipelines on a 2D grid of ranks).
func LU(c bench.Comm, o Options) (*Stats, error) { return luPattern.Run(c, o) }

// BT runs the BT pattern (multi-partition faces and block-tridiagonal
// line solves).
func BT(c bench.Comm, o Options) (*Stats, error) { return btPattern.Run(c, o) }

// SP runs the SP pattern (multi-partition faces and scalar-pentadiagonal
// line solves).
func SP(c bench.Comm, o Options) (*Stats, error) { return spPattern.Run(c, o) }
