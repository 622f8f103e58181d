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

// Pool is a free list of *T. The zero value is an empty pool.
type Pool[T any] struct{ free []*T }

// Get returns the most recently Put object, as it was Put (resetting is
// the caller's business: what must survive a recycle differs per type),
// or a new zero T when none is idle.
func (p *Pool[T]) Get() *T {
	if x := p.Take(); x != nil {
		return x
	}
	return new(T)
}

// Take is Get for a caller that sets up new objects itself (the engine
// gives a new request a slot in its request table): it returns nil when
// none is idle.
func (p *Pool[T]) Take() (x *T) {
	// No constructor hook, no clearing of the slot, and this exact shape:
	// anything more and the engine's newRequest, which inlines Take, is no
	// longer inlined itself, which costs the eager path two calls a
	// message. The slot keeps its pointer until the next Put overwrites
	// it; an object in use is alive anyway.
	if n := len(p.free) - 1; n >= 0 {
		x = p.free[n]
		p.free = p.free[:n]
	}
	return x
}

// Put hands x back for a later Get. The caller must not use x again.
func (p *Pool[T]) Put(x *T) { p.free = append(p.free, x) }

// Idle returns how many objects wait in the free list.
func (p *Pool[T]) Idle() int { return len(p.free) }
