package patterns

// NPB BT and SP, class A (see the package doc for the generalized
// multi-partition that lets them run on any number of ranks): a 64^3
// grid, 200 (BT) and 400 (SP) time steps after an untimed one.
const btN = 64

var btPattern = &Pattern{
	Name:        "bt",
	Doc:         "NPB BT: multi-partition face exchange and pipelined block-tridiagonal line solves in x, y, z",
	ClassAIters: 201, DefaultIters: 20,
	gen: func(r *run) error { return genMultiPartition(r, 30, 5) },
}

var spPattern = &Pattern{
	Name:        "sp",
	Doc:         "NPB SP: multi-partition face exchange and pipelined scalar-pentadiagonal line solves in x, y, z",
	ClassAIters: 401, DefaultIters: 40,
	gen: func(r *run) error { return genMultiPartition(r, 22, 10) },
}

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
	s := newLineSolver(r, fwd, back)
	names := [3]string{"x_solve", "y_solve", "z_solve"}
	for it := range r.iters {
		r.at("copy_faces", it)
		if err := s.copyFaces(); err != nil {
			return err
		}
		for d := range 3 {
			r.at(names[d], it)
			if err := s.solve(d); err != nil {
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

// sides are the steps to a cell's two neighbours in a direction: side 0
// is −1 (the predecessor), side 1 is +1 (the successor).
var sides = [2]int{-1, 1}

// lineSolver is one rank's part of BT's or SP's time step on the
// multi-partition: its neighbours and its messages' sizes, planned once.
type lineSolver struct {
	r    *run
	last [3]int // the last slab of each direction
	// For direction d and side i: the neighbour (-1: none), the size of
	// a copy_faces message either way (the two ends share the faces),
	// and per slab t the size of the solve messages between t and its
	// neighbour on side i: forward (toward +1) and back (toward −1).
	nb      [3][2]int
	faceMsg [3][2]int
	fwdT    [3][2][]int
	bckT    [3][2][]int
}

// newLineSolver plans rank r.me's messages with fwd and back doubles per
// face point in the solves' two sweeps.
func newLineSolver(r *run, fwd, back int) *lineSolver {
	mp := newMultiPartition(r.n)
	s := &lineSolver{r: r}
	for d := range 3 {
		s.last[d] = mp.cells[d] - 1
		for i, st := range sides {
			s.nb[d][i] = mp.neighbour(r.me, d, st)
			s.faceMsg[d][i] = r.scaled(2 * 5 * 8 * mp.faces(r.me, d, -1, st))
			for t := range mp.cells[d] {
				pts := mp.faces(r.me, d, t, st)
				s.fwdT[d][i] = append(s.fwdT[d][i], r.scaled(8*fwd*pts))
				s.bckT[d][i] = append(s.bckT[d][i], r.scaled(8*back*pts))
			}
		}
	}
	return s
}

// copyFaces computes the right-hand side, then exchanges the faces:
// receives from both sides of each direction, then the sends, then wait.
func (s *lineSolver) copyFaces() error {
	r := s.r
	r.spin() // compute_rhs
	for d := range 3 {
		for i := range sides {
			if p := s.nb[d][i]; p >= 0 {
				if err := r.recv(p, s.faceMsg[d][i]); err != nil {
					return err
				}
			}
		}
	}
	for d := range 3 {
		for _, i := range [2]int{1, 0} {
			if p := s.nb[d][i]; p >= 0 {
				if err := r.send(p, s.faceMsg[d][i]); err != nil {
					return err
				}
			}
		}
	}
	return r.wait()
}

// solve is the line solve in direction d: forward elimination slab by
// slab toward the successor, back substitution toward the predecessor.
// A stage receives (and waits), solves, and starts its send without
// waiting for it — NPB's x_send_solve_info is an MPI_Isend waited for
// later; a blocking send would deadlock two ranks that are each other's
// successor.
func (s *lineSolver) solve(d int) error {
	r := s.r
	pred, succ, last := s.nb[d][0], s.nb[d][1], s.last[d]
	for t := 0; t <= last; t++ {
		if t > 0 {
			if err := s.recvWait(pred, s.fwdT[d][0][t]); err != nil {
				return err
			}
		}
		r.spin()
		if t < last {
			if err := r.send(succ, s.fwdT[d][1][t]); err != nil {
				return err
			}
		}
	}
	for t := last; t >= 0; t-- {
		if t < last {
			if err := s.recvWait(succ, s.bckT[d][1][t]); err != nil {
				return err
			}
		}
		r.spin()
		if t > 0 {
			if err := r.send(pred, s.bckT[d][0][t]); err != nil {
				return err
			}
		}
	}
	return r.wait()
}

// recvWait receives a solve stage's message and waits for it.
func (s *lineSolver) recvWait(peer, size int) error {
	if err := s.r.recv(peer, size); err != nil {
		return err
	}
	return s.r.wait()
}
