package patterns

// NPB MG, class A (see the package doc): a periodic 256^3 grid, 8
// levels (level k has 2^k points a side), 4 iterations after an untimed
// one.
const mgLevels = 8

var mgPattern = &Pattern{
	Name:        "mg",
	Doc:         "NPB MG: 3D halo exchange with 6 neighbours at every level of a V-cycle, and small allreduces",
	ClassAIters: 5, DefaultIters: 5,
	gen: genMG,
}

// grid3 splits n ranks into px ≤ py ≤ pz, as evenly as possible (for a
// power of two: NPB MG's split).
func grid3(n int) [3]int {
	best := [3]int{1, 1, n}
	for a := 1; a*a*a <= n; a++ {
		if n%a != 0 {
			continue
		}
		for b := a; a*b*b <= n; b++ {
			if (n/a)%b != 0 {
				continue
			}
			c := n / a / b
			if c-a < best[2]-best[0] {
				best = [3]int{a, b, c}
			}
		}
	}
	return best
}

type mgGrid struct {
	p, at    [3]int    // ranks per axis, this rank's place
	nb       [3][2]int // neighbours per axis: −, +
	faceSize [mgLevels + 1][3]int
}

func newMGGrid(n, me int) *mgGrid {
	g := &mgGrid{p: grid3(n)}
	g.at = [3]int{me % g.p[0], me / g.p[0] % g.p[1], me / (g.p[0] * g.p[1])}
	for ax := range 3 {
		for i, d := range [2]int{-1, 1} {
			c := g.at
			c[ax] = (c[ax] + d + g.p[ax]) % g.p[ax]
			g.nb[ax][i] = c[0] + g.p[0]*(c[1]+g.p[1]*c[2])
		}
	}
	for k := 1; k <= mgLevels; k++ {
		var m [3]int
		for ax := range 3 {
			m[ax] = max(1, (1<<k)/g.p[ax])
		}
		g.faceSize[k] = [3]int{8 * m[1] * m[2], 8 * (m[0] + 2) * m[2], 8 * (m[0] + 2) * (m[1] + 2)}
	}
	return g
}

func genMG(r *run) error {
	g := newMGGrid(r.n, r.me)
	comm3 := func(k int) error {
		r.spin() // the stencil that produced the level
		for ax := range 3 {
			if g.p[ax] == 1 {
				continue
			}
			size := r.scaled(g.faceSize[k][ax])
			lo, hi := g.nb[ax][0], g.nb[ax][1]
			for _, s := range [2]int{lo, hi} {
				if err := r.recv(s, size); err != nil {
					return err
				}
			}
			for _, d := range [2]int{hi, lo} {
				if err := r.send(d, size); err != nil {
					return err
				}
			}
			if err := r.wait(); err != nil {
				return err
			}
		}
		return nil
	}
	norm := func() error {
		for range 2 { // sum and max, one double each
			if err := r.allreduce(8); err != nil {
				return err
			}
		}
		return nil
	}
	r.at("setup", 0)
	for range 2 { // zran3, resid
		if err := comm3(mgLevels); err != nil {
			return err
		}
	}
	if err := norm(); err != nil {
		return err
	}
	for it := range r.iters {
		r.at("mg3P down", it)
		for k := mgLevels - 1; k >= 1; k-- { // rprj3
			if err := comm3(k); err != nil {
				return err
			}
		}
		r.at("mg3P bottom", it)
		if err := comm3(1); err != nil { // psinv
			return err
		}
		r.at("mg3P up", it)
		for k := 2; k <= mgLevels; k++ { // interp, resid, psinv
			for range 2 {
				if err := comm3(k); err != nil {
					return err
				}
			}
		}
		r.at("resid", it)
		if err := comm3(mgLevels); err != nil {
			return err
		}
	}
	r.at("norm2u3", r.iters)
	return norm()
}
