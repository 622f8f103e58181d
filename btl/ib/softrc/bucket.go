package softrc

import "math"

// bucket is a token bucket that shapes a port's egress to its link rate
// (bytes per second). Tokens are bytes; they accrue at rate and the bucket
// holds at most burst of them, so that over any interval T at most
// rate·T + burst bytes leave the port. Times are nanoseconds on the
// device's monotonic clock. A zero rate means unlimited.
type bucket struct {
	rate   float64 // bytes per nanosecond
	burst  float64
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
	b := &bucket{rate: rate / 1e9, last: now}
	b.burst = math.Max(64<<10, rate*1e-3)
	b.tokens = b.burst
	return b
}

func (b *bucket) refill(now int64) {
	if now > b.last {
		b.tokens = math.Min(b.burst, b.tokens+float64(now-b.last)*b.rate)
		b.last = now
	}
}

// allow returns how many of want bytes may leave now. Below half a burst
// of tokens it allows nothing, so a busy poller writes in chunks rather
// than a syscall per trickle of tokens.
func (b *bucket) allow(now int64, want int) int {
	if b == nil {
		return want
	}
	b.refill(now)
	if b.tokens < math.Min(float64(want), b.burst/2) {
		return 0
	}
	if float64(want) > b.tokens {
		return int(b.tokens)
	}
	return want
}

// take consumes n tokens after n bytes left.
func (b *bucket) take(n int) {
	if b != nil {
		b.tokens -= float64(n)
	}
}

// readyAt is when at least min(need, burst) tokens will be available.
func (b *bucket) readyAt(now int64, need int) int64 {
	if b == nil {
		return now
	}
	b.refill(now)
	want := math.Min(float64(need), b.burst/2)
	if b.tokens >= want {
		return now
	}
	return now + int64(math.Ceil((want-b.tokens)/b.rate))
}
