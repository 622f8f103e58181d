// Package pool keeps free lists of the protocol engine's objects —
// requests, unexpected messages, queued frames, RDMA stripes — and of its
// byte buffers, so that in steady state a message allocates nothing: an
// object is recycled the moment the engine is done with it, without
// waiting for the garbage collector, and without sync.Pool, which may
// drop objects at any GC and costs atomics the single-lock engine does not
// need.
//
// Nothing here is safe for concurrent use; the engine's lock guards it.
package pool

// Pool is a free list of *T. The zero value is usable and makes new
// objects with new(T).
type Pool[T any] struct {
	// New makes an object when the free list is empty; nil means new(T).
	// It runs only on a miss, so it may be a closure that registers the
	// object somewhere (the engine's request table).
	New  func() *T
	free []*T
}

// Get returns the most recently Put object, as it was Put (resetting is
// the caller's business: what must survive a recycle differs per type),
// or a new one.
func (p *Pool[T]) Get() *T {
	if n := len(p.free); n > 0 {
		x := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return x
	}
	if p.New != nil {
		return p.New()
	}
	return new(T)
}

// Put hands x back for a later Get. The caller must not use x again.
func (p *Pool[T]) Put(x *T) { p.free = append(p.free, x) }

// Idle returns how many objects wait in the free list.
func (p *Pool[T]) Idle() int { return len(p.free) }
