package patterns

// NPB IS, class A (see the package doc): 2^23 keys, 1024 buckets, 10
// ranking iterations after an untimed one.
const (
	isKeys        = 1 << 23
	isBucketBytes = (1024 + 5) * 4
)

var isPattern = &Pattern{
	Name:        "is",
	Doc:         "NPB IS: per iteration an allreduce of bucket sizes, an alltoall of counts and an alltoallv of keys",
	ClassAIters: 11, DefaultIters: 11,
	gen: genIS,
}

// isBlock is the size of the keys rank src sends rank dst in iteration it:
// 4 bytes per key, the class A share ±2 %.
func (r *run) isBlock(it, src, dst int) int {
	keys := float64(isKeys) / float64(r.n*r.n)
	u := float64(mix(uint64(it)<<32|uint64(src)<<16|uint64(dst))>>11) / (1 << 53)
	return r.scaled(4 * int(keys*(0.98+0.04*u)))
}

func genIS(r *run) error {
	for it := range r.iters {
		r.at("rank", it)
		r.spin() // count the local keys into buckets
		if err := r.allreduce(isBucketBytes); err != nil {
			return err
		}
		if err := r.alltoall(func(int, int) int { return 4 }); err != nil {
			return err
		}
		if err := r.alltoall(func(s, d int) int { return r.isBlock(it, s, d) }); err != nil {
			return err
		}
		r.spin() // rank the received keys
	}
	r.at("full_verify", 0)
	if r.me > 0 {
		if err := r.recv(r.me-1, 4); err != nil {
			return err
		}
	}
	if r.me < r.n-1 {
		if err := r.send(r.me+1, 4); err != nil {
			return err
		}
	}
	if err := r.wait(); err != nil {
		return err
	}
	return r.reduce(4)
}
