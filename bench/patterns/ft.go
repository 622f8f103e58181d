package patterns

// NPB FT, class A (see the package doc): 256×256×128 double complex, 6
// iterations. NPB does one forward FFT untimed to touch the data, then
// starts over: the forward FFT and the iterations.
const ftGridBytes = 256 * 256 * 128 * 16

var ftPattern = &Pattern{
	Name:        "ft",
	Doc:         "NPB FT: per iteration an alltoall transpose of large blocks and a checksum reduce",
	ClassAIters: 6, DefaultIters: 6,
	gen: genFT,
}

func genFT(r *run) error {
	block := r.scaled(ftGridBytes / (r.n * r.n))
	transpose := func() error {
		r.spin() // the 1D FFTs before the transpose
		if err := r.alltoall(func(int, int) int { return block }); err != nil {
			return err
		}
		r.spin() // and after it
		return nil
	}
	for i := range 2 { // untimed warm-up, then timed
		r.at("forward fft", i)
		if err := transpose(); err != nil {
			return err
		}
	}
	for it := range r.iters {
		r.at("iteration", it)
		r.spin() // evolve
		if err := transpose(); err != nil {
			return err
		}
		if err := r.reduce(16); err != nil {
			return err
		}
	}
	return nil
}
