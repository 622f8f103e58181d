package patterns

import "math/bits"

// NPB LU, class A (see the package doc): a 64^3 grid, 250 SSOR
// iterations after an untimed one, on lu's 2D grid of ranks (proc_grid,
// neighbors), exchange_1 in the sweeps and exchange_3 in rhs.
const (
	luN      = 64
	luPlanes = luN - 2
)

var luPattern = &Pattern{
	Name:        "lu",
	Doc:         "NPB LU: SSOR wavefront pipeline, many small one-way messages per k-plane (the asymmetric case)",
	ClassAIters: 251, DefaultIters: 25,
	gen: genLU,
}

// grid2 splits n ranks into xdim ≥ ydim: NPB LU's split for a power of
// two, the most even one otherwise.
func grid2(n int) (xdim, ydim int) {
	if n&(n-1) == 0 {
		l := bits.Len(uint(n)) - 1
		xdim = 1 << ((l + 1) / 2)
		return xdim, n / xdim
	}
	for y := 1; y*y <= n; y++ {
		if n%y == 0 {
			xdim, ydim = n/y, y
		}
	}
	return xdim, ydim
}

// luGrid is this rank's place in LU's grid; a missing neighbour is -1.
type luGrid struct {
	north, south, west, east int
	// ni, nj: boundary points of the faces (iend−ist+1, jend−jst+1);
	// nx, ny: the rank's columns.
	ni, nj, nx, ny int
}

// split is the size of part p of a length-n dimension cut into k parts
// (NPB gives the first n mod k parts one point more).
func split(n, k, p int) int {
	s := n / k
	if p < n%k {
		s++
	}
	return s
}

func newLUGrid(n, me int) luGrid {
	xdim, ydim := grid2(n)
	row, col := me%xdim, me/xdim
	g := luGrid{north: -1, south: -1, west: -1, east: -1}
	if row > 0 {
		g.north = me - 1
	}
	if row < xdim-1 {
		g.south = me + 1
	}
	if col > 0 {
		g.west = me - xdim
	}
	if col < ydim-1 {
		g.east = me + xdim
	}
	g.nx, g.ny = split(luN, xdim, row), split(luN, ydim, col)
	g.ni, g.nj = g.nx, g.ny
	if g.north < 0 {
		g.ni-- // ist = 2 on the global boundary
	}
	if g.south < 0 {
		g.ni-- // iend = nx − 1
	}
	if g.west < 0 {
		g.nj--
	}
	if g.east < 0 {
		g.nj--
	}
	return g
}

// genLU runs LU: the setup's two exchange_3 and an l2norm, then per
// iteration the lower and upper wavefront sweeps over the k-planes and
// rhs's exchange_3, and a final l2norm.
func genLU(r *run) error {
	s := newLUSolver(r)
	g := s.g
	r.at("setup", 0)
	for range 2 { // erhs, rhs
		if err := s.exchange3(); err != nil {
			return err
		}
	}
	if err := r.allreduce(5 * 8); err != nil { // l2norm
		return err
	}
	for it := range r.iters {
		r.at("lower sweep", it)
		for range luPlanes {
			if err := s.sweep([2]int{g.north, g.west}, [2]int{g.south, g.east}); err != nil {
				return err
			}
		}
		r.at("upper sweep", it)
		for range luPlanes {
			if err := s.sweep([2]int{g.south, g.east}, [2]int{g.north, g.west}); err != nil {
				return err
			}
		}
		r.at("rhs", it)
		if err := s.exchange3(); err != nil {
			return err
		}
	}
	r.at("l2norm", r.iters)
	return r.allreduce(5 * 8)
}

// luSolver is one rank's part of LU: its place in the grid and the sizes
// of its messages to each neighbour.
type luSolver struct {
	r *run
	g luGrid
	// sweepSize and faceSize are, per neighbour, the size of a sweep's
	// plane boundary (exchange_1) and of a whole face (exchange_3).
	sweepSize, faceSize map[int]int
}

// newLUSolver sizes rank r.me's messages. Neighbours across a face share
// its extent (north and south are in the same column, west and east in
// the same row), so both ends size a message alike.
func newLUSolver(r *run) *luSolver {
	g := newLUGrid(r.n, r.me)
	s := &luSolver{r: r, g: g, sweepSize: map[int]int{}, faceSize: map[int]int{}}
	for _, p := range []int{g.north, g.south} {
		s.sweepSize[p] = r.scaled(5 * 8 * g.nj)
		s.faceSize[p] = r.scaled(2 * 5 * 8 * luN * g.ny)
	}
	for _, p := range []int{g.west, g.east} {
		s.sweepSize[p] = r.scaled(5 * 8 * g.ni)
		s.faceSize[p] = r.scaled(2 * 5 * 8 * luN * g.nx)
	}
	return s
}

// noPeers is an exchange's side with no one on it.
var noPeers = [2]int{-1, -1}

// exchange posts receives from and sends to the existing ranks of from
// and to, of the sizes in size, and waits: MPI_Recv and the blocking
// MPI_Send of exchange_1, MPI_Irecv/Send/Wait of exchange_3.
func (s *luSolver) exchange(from, to [2]int, size map[int]int) error {
	r := s.r
	for _, p := range from {
		if p >= 0 {
			if err := r.recv(p, size[p]); err != nil {
				return err
			}
		}
	}
	for _, p := range to {
		if p >= 0 {
			if err := r.send(p, size[p]); err != nil {
				return err
			}
		}
	}
	return r.wait()
}

// sweep receives the plane's inflow from the two upstream neighbours,
// computes the plane, then sends its outflow to the two downstream ones.
func (s *luSolver) sweep(from, to [2]int) error {
	if err := s.exchange(from, noPeers, s.sweepSize); err != nil {
		return err
	}
	s.r.spin()
	return s.exchange(noPeers, to, s.sweepSize)
}

// exchange3 swaps two planes of 5 doubles over whole faces (nz deep),
// north-south first, then west-east.
func (s *luSolver) exchange3() error {
	s.r.spin()
	ns, we := [2]int{s.g.south, s.g.north}, [2]int{s.g.east, s.g.west}
	if err := s.exchange(ns, ns, s.faceSize); err != nil {
		return err
	}
	return s.exchange(we, we, s.faceSize)
}
