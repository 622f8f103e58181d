// Command heat is a 2-D Jacobi heat-diffusion solver, a real program on
// gobtl's embedding API: a square plate whose top edge is held hot and
// whose other edges are cold, relaxed until the temperature stops
// changing.
//
// The plate is cut into bands of rows, one per rank (domain
// decomposition). Every iteration a rank exchanges its first and last
// rows with its neighbours (halo exchange with Isend/Irecv), updates its
// band, and the ranks agree on the residual — the largest change of any
// point — with Allreduce(Max). At the end Gatherv brings the bands to
// rank 0, which solves the same plate serially, checks that the two grids
// are the same bits (Jacobi updates each point with the same arithmetic
// whatever the decomposition, and the maximum does not depend on the
// order of its operands, so both stop at the same iteration), writes a
// PNG of the temperature field, and reports the parallel efficiency
// T_serial / (p · T_parallel).
//
//	gobtl run -np 4 -- heat -n 512 -png heat.png
//	for np in 1 2 4; do gobtl run -np $np -- heat; done   # efficiency at 1, 2, 4 ranks
//
// With -local N the ranks are goroutines of one process instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/gobtl/gobtl"
)

func main() {
	var p Params
	local := flag.Int("local", 0, "run N ranks as goroutines of this process")
	flag.IntVar(&p.N, "n", 256, "interior points per side")
	flag.IntVar(&p.MaxIters, "iters", 5000, "at most this many iterations")
	flag.Float64Var(&p.Tol, "tol", 1e-4, "stop when no point changes by more than this")
	png := flag.String("png", "heat.png", "write the temperature field here (rank 0); empty: none")
	check := flag.Bool("check", true, "rank 0 solves serially and compares (and reports the efficiency)")
	flag.Parse()

	run := func(c *gobtl.Comm) error {
		r, err := Solve(c, p)
		if err != nil || c.Rank() != 0 {
			return err
		}
		fmt.Printf("heat: %d×%d, %d ranks: %d iterations, residual %.3g, %.3fs\n",
			p.N, p.N, c.Size(), r.Iters, r.Residual, r.Elapsed.Seconds())
		if *check {
			s := SolveSerial(p)
			if err := Compare(r, s); err != nil {
				return err
			}
			// Ranks beyond the machine's CPUs share them: the efficiency
			// cannot pass CPUs/ranks then, and the line says so.
			cpus := runtime.NumCPU()
			fmt.Printf("heat: serial solve %.3fs: grids identical; speedup %.2f, parallel efficiency %.2f at %d ranks (%d CPUs: at most %.2f)\n",
				s.Elapsed.Seconds(), s.Elapsed.Seconds()/r.Elapsed.Seconds(),
				s.Elapsed.Seconds()/(float64(c.Size())*r.Elapsed.Seconds()), c.Size(),
				cpus, min(1, float64(cpus)/float64(c.Size())))
		}
		if *png != "" {
			if err := WritePNG(*png, r.Grid, p.N+2); err != nil {
				return err
			}
			fmt.Printf("heat: wrote %s\n", *png)
		}
		return nil
	}

	ctx := context.Background()
	var err error
	if *local > 0 {
		err = gobtl.RunLocal(ctx, *local, gobtl.Options{}, run)
	} else {
		var c *gobtl.Comm
		if c, err = gobtl.Init(ctx, gobtl.Options{}); err == nil {
			err = run(c)
			if cerr := c.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "heat:", err)
		os.Exit(1)
	}
}
