package bench

func (b *runner) alltoall(n int) (Row, error) {
	c := b.c
	all := n * c.Size()
	for i := 0; i < b.warmup+b.iters; i++ {
		b.lap(i)
		if err := c.Alltoall(b.sbuf[:all], b.rbuf[:all], n); err != nil {
			return Row{}, err
		}
	}
	lats, err := b.gather(micros(b.lap(b.warmup+b.iters)) / float64(b.iters))
	if c.Rank() != 0 || err != nil {
		return Row{}, err
	}
	sum := 0.0
	for _, l := range lats {
		sum += l
	}
	return b.row(Field{"lat_us", sum / float64(len(lats))}, micros), nil
}
