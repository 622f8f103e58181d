package patterns

// The collectives of the patterns, written out in point-to-point messages
// on the pattern's tag so that every message is counted and checked. The
// algorithms are those of MPICH's defaults for the sizes NPB uses.

// allreduce of size bytes: recursive doubling (log2 n exchanges with rank
// XOR 2^k). When n is not a power of two, the first 2·rem ranks pair up
// (odd ranks hand their part to the even rank below and get the result
// back at the end), as MPICH does.
func (r *run) allreduce(size int) error {
	pof2 := 1
	for pof2*2 <= r.n {
		pof2 *= 2
	}
	rem := r.n - pof2
	me, vr := r.me, -1
	switch {
	case me < 2*rem && me%2 == 1:
		if err := r.send(me-1, size); err != nil {
			return err
		}
		if err := r.wait(); err != nil {
			return err
		}
	case me < 2*rem:
		if err := r.recv(me+1, size); err != nil {
			return err
		}
		if err := r.wait(); err != nil {
			return err
		}
		vr = me / 2
	default:
		vr = me - rem
	}
	if vr >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			vp := vr ^ mask
			peer := vp + rem
			if vp < rem {
				peer = vp * 2
			}
			if err := r.exchange(peer, size, size); err != nil {
				return err
			}
			r.spin()
		}
	}
	if me < 2*rem {
		if me%2 == 1 {
			if err := r.recv(me-1, size); err != nil {
				return err
			}
		} else if err := r.send(me+1, size); err != nil {
			return err
		}
		return r.wait()
	}
	return nil
}

// reduce of size bytes to rank 0: a binomial tree (rank r receives from
// r+2^k while bit k of r is clear, then sends to r-2^k).
func (r *run) reduce(size int) error {
	for mask := 1; mask < r.n; mask <<= 1 {
		if r.me&mask != 0 {
			if err := r.send(r.me-mask, size); err != nil {
				return err
			}
			return r.wait()
		}
		if r.me+mask < r.n {
			if err := r.recv(r.me+mask, size); err != nil {
				return err
			}
			if err := r.wait(); err != nil {
				return err
			}
			r.spin()
		}
	}
	return nil
}

// alltoall sends size(me, d) bytes to every other rank d and receives
// size(s, me) from every other rank s: all receives posted, then the sends
// in the order me+1, me+2, ... (the pml's Alltoall, and MPICH's pairwise
// order for large blocks). The block a rank keeps for itself is a local
// copy, no message.
func (r *run) alltoall(size func(src, dst int) int) error {
	for i := 1; i < r.n; i++ {
		src := (r.me - i + r.n) % r.n
		if err := r.recv(src, size(src, r.me)); err != nil {
			return err
		}
	}
	for i := 1; i < r.n; i++ {
		dst := (r.me + i) % r.n
		if err := r.send(dst, size(r.me, dst)); err != nil {
			return err
		}
	}
	return r.wait()
}
