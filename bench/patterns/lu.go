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

func genLU(r *run) error {
	g := newLUGrid(r.n, r.me)
	// Neighbours across a face share its extent (north and south are in
	// the same column, west and east in the same row), so both ends size
	// a message alike.
	sweepSize, faceSize := map[int]int{}, map[int]int{}
	for _, p := range []int{g.north, g.south} {
		sweepSize[p] = r.scaled(5 * 8 * g.nj)
		faceSize[p] = r.scaled(2 * 5 * 8 * luN * g.ny)
	}
	for _, p := range []int{g.west, g.east} {
		sweepSize[p] = r.scaled(5 * 8 * g.ni)
		faceSize[p] = r.scaled(2 * 5 * 8 * luN * g.nx)
	}
	// exchange posts receives from and sends to the existing ranks of
	// from and to, of the sizes in size, and waits: MPI_Recv and the
	// blocking MPI_Send of exchange_1, MPI_Irecv/Send/Wait of exchange_3.
	exchange := func(from, to [2]int, size map[int]int) error {
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
	// computes the plane, then sends its outflow to the two downstream
	// ones.
	none := [2]int{-1, -1}
	sweep := func(from, to [2]int) error {
		if err := exchange(from, none, sweepSize); err != nil {
			return err
		}
		r.spin()
		return exchange(none, to, sweepSize)
	}
	// exchange3 swaps two planes of 5 doubles over whole faces (nz deep),
	// north-south first, then west-east.
	exchange3 := func() error {
		r.spin()
		ns, we := [2]int{g.south, g.north}, [2]int{g.east, g.west}
		if err := exchange(ns, ns, faceSize); err != nil {
			return err
		}
		return exchange(we, we, faceSize)
	}
	r.at("setup", 0)
	for range 2 { // erhs, rhs
		if err := exchange3(); err != nil {
			return err
		}
	}
	if err := r.allreduce(5 * 8); err != nil { // l2norm
		return err
	}
	for it := range r.iters {
		r.at("lower sweep", it)
		for range luPlanes {
			if err := sweep([2]int{g.north, g.west}, [2]int{g.south, g.east}); err != nil {
				return err
			}
		}
		r.at("upper sweep", it)
		for range luPlanes {
			if err := sweep([2]int{g.south, g.east}, [2]int{g.north, g.west}); err != nil {
				return err
			}
		}
		r.at("rhs", it)
		if err := exchange3(); err != nil {
			return err
		}
	}
	r.at("l2norm", r.iters)
	return r.allreduce(5 * 8)
}
