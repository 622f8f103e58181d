package bench

import "time"

func (b *runner) alltoall(n int) (Row, error) {
	c := b.c
	all := n * c.Size()
	var t0 time.Time
	for i := 0; i < b.warmup+b.iters; i++ {
		if i == b.warmup {
			t0 = time.Now()
		}
		if err := c.Alltoall(b.sbuf[:all], b.rbuf[:all], n); err != nil {
			return Row{}, err
		}
	}
	lats, err := b.gather(micros(time.Since(t0)) / float64(b.iters))
	if c.Rank() != 0 || err != nil {
		return Row{}, err
	}
	sum := 0.0
	for _, l := range lats {
		sum += l
	}
	return Row{Fields: []Field{{"lat_us", sum / float64(len(lats))}}}, nil
}
