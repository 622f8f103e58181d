package softrc

import "math"

// bucket is a token bucket that shapes a port's egress to its link rate
// (bytes per second). Tokens are bytes; they accrue at rate and the bucket
// holds at most burst of them, so that over any interval T at most
// rate·T + burst bytes leave the port. Times are nanoseconds on the
// device's monotonic clock. A zero rate means unlimited.
//
// The state (tokens, last refill) is the port's own, or, for a port that
// names a shared link, lives in shared memory so that the ports of several
// processes share one link rate (link_shared.go).
type bucket struct {
	rate  float64 // bytes per nanosecond
	burst float64
	st    *bucketState
	link  *sharedLink // nil: the state is private to the port
}

// bucketState is what a bucket remembers between calls. Its layout is
// fixed: a shared link keeps it in a file mapped by every process on it.
type bucketState struct {
	tokens float64
	last   int64
}

// newBucket returns a full bucket for rate bytes/s. The burst is the bytes
// of 1 ms at rate, but at least 64 KiB: a link at any rate moves whole
// chunks, and a poller that is descheduled for up to a millisecond (two
// cores shared by many ranks) loses no link time, while the shaping error
// stays within a millisecond's worth of bytes.
func newBucket(rate float64, now int64) *bucket {
	if rate <= 0 {
		return nil
	}
	b := &bucket{rate: rate / 1e9, burst: burstOf(rate), st: &bucketState{last: now}}
	b.st.tokens = b.burst
	return b
}

func burstOf(rate float64) float64 { return math.Max(64<<10, rate*1e-3) }

func (b *bucket) lock(now int64) int64 {
	if b.link == nil {
		return now
	}
	return b.link.lock(now)
}

func (b *bucket) unlock() {
	if b.link != nil {
		b.link.unlock()
	}
}

func (b *bucket) refill(now int64) {
	if now > b.st.last {
		b.st.tokens = math.Min(b.burst, b.st.tokens+float64(now-b.st.last)*b.rate)
		b.st.last = now
	}
}

// allow returns how many of want bytes may leave now. Below half a burst
// of tokens it allows nothing, so a busy poller writes in chunks rather
// than a syscall per trickle of tokens.
func (b *bucket) allow(now int64, want int) int {
	if b == nil {
		return want
	}
	now = b.lock(now)
	defer b.unlock()
	b.refill(now)
	if b.st.tokens < math.Min(float64(want), b.burst/2) {
		return 0
	}
	if float64(want) > b.st.tokens {
		return int(b.st.tokens)
	}
	return want
}

// take consumes n tokens after n bytes left. On a shared link another
// process may have taken tokens since allow: the bucket goes into debt,
// which the next allow waits out.
func (b *bucket) take(n int) {
	if b != nil {
		b.lock(0)
		b.st.tokens -= float64(n)
		b.unlock()
	}
}

// readyAt is when at least min(need, burst) tokens will be available.
func (b *bucket) readyAt(now int64, need int) int64 {
	if b == nil {
		return now
	}
	shared := b.lock(now)
	defer b.unlock()
	b.refill(shared)
	want := math.Min(float64(need), b.burst/2)
	if b.st.tokens >= want {
		return now
	}
	return now + int64(math.Ceil((want-b.st.tokens)/b.rate))
}

// close detaches from a shared link.
func (b *bucket) close() {
	if b != nil && b.link != nil {
		b.link.close()
		b.link = nil
	}
}
