package patterns

// NPB BT and SP, class A: a 64^3 grid, 200 (BT) and 400 (SP) time steps
// after one untimed one, on a multi-partition of the grid into cells.
//
// Multi-partition: NPB needs n = q² ranks, cuts the grid into q×q×q cells
// and gives each rank q cells, one in every slab of every direction, so
// that each stage of a line solve keeps every rank busy and all the cells
// a rank borders in one direction belong to one rank. Seed 000 ran BT and
// SP on 16 ranks for that reason. The pattern uses the generalized
// multi-partitioning (Darte, Mellor-Crummey et al.) for any n: write
// n = q·s with s dividing q and s as large as possible (s = q for a
// square, q = 4, s = 2 at 8 ranks), cut the grid into q×q×s cells and
// give cell (i, j, k) to the rank (a, b) = ((j−i) mod q, (k−i) mod s),
// numbered a·s + b. Each rank then owns q cells, one in every x and y
// slab and q/s in every z slab, and its neighbours in a direction are one
// rank: x ± 1 is (a∓1, b∓1), y ± 1 is (a±1, b), z ± 1 is (a, b±1). At 16
// ranks this is NPB's layout; at 8 ranks the cells are 16×16×32 and each
// rank has 5 partners (its z successor and predecessor are the same rank).
//
// One time step (adi) is
//
//   - copy_faces: six messages, one per direction, each holding two
//     planes of 5 doubles over the faces of all the rank's cells that have
//     a neighbour that way;
//   - x_solve, y_solve, z_solve: a pipeline over the slabs of the
//     direction. Forward elimination: at stage t the rank receives from
//     its predecessor (t > 0), solves its cells of slab t and sends to its
//     successor (t < last); back substitution runs the other way. BT's
//     forward message holds a 5×5 block and a 5-vector per face point (30
//     doubles), its backward one a 5-vector; SP's hold 22 and 10 doubles
//     per face point (its pentadiagonal factors of two rows, and two rows
//     of the solution).
//
// The end reduces the two verification norms (5 doubles each) to rank 0.
const btN = 64

var btPattern = register(&Pattern{
	Name:        "bt",
	Doc:         "NPB BT: multi-partition face exchange and pipelined block-tridiagonal line solves in x, y, z",
	ClassAIters: 201, DefaultIters: 20, DefaultScale: 0.5,
	gen: func(r *run) error { return genMultiPartition(r, 30, 5) },
})

var spPattern = register(&Pattern{
	Name:        "sp",
	Doc:         "NPB SP: multi-partition face exchange and pipelined scalar-pentadiagonal line solves in x, y, z",
	ClassAIters: 401, DefaultIters: 40, DefaultScale: 0.5,
	gen: func(r *run) error { return genMultiPartition(r, 22, 10) },
})

// multiPartition is the cell layout for n ranks.
type multiPartition struct {
	q, s int
	// cells[d] is the number of cells along direction d: q, q, s.
	cells [3]int
}

func newMultiPartition(n int) multiPartition {
	mp := multiPartition{q: n, s: 1}
	for s := 1; s*s <= n; s++ {
		if n%s == 0 && (n/s)%s == 0 {
			mp.q, mp.s = n/s, s
		}
	}
	mp.cells = [3]int{mp.q, mp.q, mp.s}
	return mp
}

// owner is the rank of cell c.
func (mp multiPartition) owner(c [3]int) int {
	a := ((c[1]-c[0])%mp.q + mp.q) % mp.q
	b := ((c[2]-c[0])%mp.s + mp.s) % mp.s
	return a*mp.s + b
}

// owned lists the cells of rank me: one per x slab.
func (mp multiPartition) owned(me int) [][3]int {
	a, b := me/mp.s, me%mp.s
	cells := make([][3]int, mp.q)
	for i := range mp.q {
		cells[i] = [3]int{i, (a + i) % mp.q, (b + i) % mp.s}
	}
	return cells
}

// neighbour is the rank that owns the cells next to rank me's in
// direction d, step ±1 (-1 when me has no cell with such a neighbour).
func (mp multiPartition) neighbour(me, d, step int) int {
	for _, c := range mp.owned(me) {
		c[d] += step
		if c[d] >= 0 && c[d] < mp.cells[d] {
			return mp.owner(c)
		}
	}
	return -1
}

// faces is the number of points on the faces normal to direction d of the
// cells of me in slab t of d (all slabs when t < 0) that have a neighbour
// at step (0: any), and the cells' extents come from splitting btN.
func (mp multiPartition) faces(me, d, t, step int) int {
	pts := 0
	for _, c := range mp.owned(me) {
		if t >= 0 && c[d] != t {
			continue
		}
		if step != 0 && (c[d]+step < 0 || c[d]+step >= mp.cells[d]) {
			continue
		}
		area := 1
		for e := range 3 {
			if e != d {
				area *= split(btN, mp.cells[e], c[e])
			}
		}
		pts += area
	}
	return pts
}

// genMultiPartition runs BT (fwd = 30, back = 5 doubles per face point)
// or SP (22, 10).
func genMultiPartition(r *run, fwd, back int) error {
	mp := newMultiPartition(r.n)
	steps := [2]int{-1, 1}
	// For direction d and side i (steps[i]): the neighbour, the size of a
	// copy_faces message either way (the two ends share the faces), and
	// per slab t the size of the solve messages between t and t+steps[i]:
	// forward (toward +1) and back (toward −1).
	var (
		nb      [3][2]int
		faceMsg [3][2]int
		fwdT    [3][2][]int
		bckT    [3][2][]int
	)
	for d := range 3 {
		for i, st := range steps {
			nb[d][i] = mp.neighbour(r.me, d, st)
			faceMsg[d][i] = r.scaled(2 * 5 * 8 * mp.faces(r.me, d, -1, st))
			for t := range mp.cells[d] {
				pts := mp.faces(r.me, d, t, st)
				fwdT[d][i] = append(fwdT[d][i], r.scaled(8*fwd*pts))
				bckT[d][i] = append(bckT[d][i], r.scaled(8*back*pts))
			}
		}
	}
	// copyFaces: receives from both sides of each direction, then the
	// sends, then wait.
	copyFaces := func() error {
		r.spin() // compute_rhs
		for d := range 3 {
			for i := range steps {
				if p := nb[d][i]; p >= 0 {
					if err := r.recv(p, faceMsg[d][i]); err != nil {
						return err
					}
				}
			}
		}
		for d := range 3 {
			for _, i := range [2]int{1, 0} {
				if p := nb[d][i]; p >= 0 {
					if err := r.send(p, faceMsg[d][i]); err != nil {
						return err
					}
				}
			}
		}
		return r.wait()
	}
	// step moves one solve message: receive it (recv) or send it, and
	// wait, as the blocking calls of x_solve do.
	step := func(recv bool, peer, size int) error {
		var err error
		if recv {
			err = r.recv(peer, size)
		} else {
			err = r.send(peer, size)
		}
		if err != nil {
			return err
		}
		return r.wait()
	}
	// solve is the line solve in direction d: forward elimination slab by
	// slab toward the successor, back substitution toward the predecessor.
	solve := func(d int) error {
		pred, succ, last := nb[d][0], nb[d][1], mp.cells[d]-1
		for t := 0; t <= last; t++ {
			if t > 0 {
				if err := step(true, pred, fwdT[d][0][t]); err != nil {
					return err
				}
			}
			r.spin()
			if t < last {
				if err := step(false, succ, fwdT[d][1][t]); err != nil {
					return err
				}
			}
		}
		for t := last; t >= 0; t-- {
			if t < last {
				if err := step(true, succ, bckT[d][1][t]); err != nil {
					return err
				}
			}
			r.spin()
			if t > 0 {
				if err := step(false, pred, bckT[d][0][t]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	names := [3]string{"x_solve", "y_solve", "z_solve"}
	for it := range r.iters {
		r.at("copy_faces", it)
		if err := copyFaces(); err != nil {
			return err
		}
		for d := range 3 {
			r.at(names[d], it)
			if err := solve(d); err != nil {
				return err
			}
		}
	}
	r.at("verify", r.iters)
	for range 2 {
		if err := r.reduce(5 * 8); err != nil {
			return err
		}
	}
	return nil
}
