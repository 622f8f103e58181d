package patterns

// NPB FT, class A: a 256×256×128 grid of double complex (16 B), 6
// iterations. With n ≤ 128 ranks NPB uses the 1D layout: every 3D FFT
// transposes the whole grid once, an MPI_Alltoall of 2^23·16/n^2 bytes
// per pair (2 MiB at 8 ranks). The program does one forward FFT, then per
// iteration evolve, an inverse FFT and a checksum (MPI_Reduce of one
// double complex to rank 0). NPB runs this twice, the first time untimed;
// the pattern does the forward transpose once and Iters iterations.
const ftGridBytes = 256 * 256 * 128 * 16

var ftPattern = register(&Pattern{
	Name:        "ft",
	Doc:         "NPB FT: per iteration an alltoall transpose of large blocks and a checksum reduce",
	ClassAIters: 6, DefaultIters: 6, DefaultScale: 0.125,
	gen: genFT,
})

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
	r.at("forward fft", 0)
	if err := transpose(); err != nil {
		return err
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
