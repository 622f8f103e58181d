package softrc

import "math"

// bucket shapes a port's egress to its link rate (bytes per second). It
// is a token bucket whose tokens are link time: they accrue at rate while
// the link has bytes waiting, up to burst, so that a poller descheduled
// for up to a millisecond (two cores shared by many ranks) loses no link
// time and over any busy interval T at most rate·T + burst bytes leave.
//
// An idle link earns no credit: while no packet waits, the tokens stop at
// idleCredit (an eager frame). A token bucket that filled up while idle let a message of up to
// a burst (a megabyte at 1GB/s) leave at once, so an isolated message of
// any size below the burst crossed the link faster than its rate — wrong
// for latency, and for the delivery time of every stripe that adaptive
// striping measures (seed 001 §4.5). A real link serialises n bytes in
// n/rate whatever it did before; here an eager frame starts at once and
// a larger message waits its serialisation time, written in chunks.
//
// Times are nanoseconds on the device's monotonic clock. A nil bucket is
// an unlimited link. The state (tokens, last refill, how many links wait)
// is the port's own, or, for a port that names a shared link, lives in
// shared memory so that the ports of several processes share one link
// rate (link_shared.go).
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
	// waiting counts the links (of every port on the link) with packets
	// queued; tokens accrue beyond idleCredit only while it is positive.
	waiting int64
}

// idleCredit is what an idle link may send at once: an eager frame (the
// ib BTL's eager limit is 12 KiB). A packet that waits for tokens waits
// for a deadline and a wake-up, tens of microseconds in a software device
// on a loaded host, which is more than the few microseconds of
// serialisation such a packet would take.
const idleCredit = 16 << 10

// newBucket returns an idle bucket for rate bytes/s. The burst is the
// bytes of 1 ms at rate, but at least 64 KiB.
func newBucket(rate float64, now int64) *bucket {
	if rate <= 0 {
		return nil
	}
	b := &bucket{rate: rate / 1e9, burst: burstOf(rate), st: &bucketState{last: now}}
	b.st.tokens = idleCredit
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
	if now <= b.st.last {
		return
	}
	t := b.st.tokens + float64(now-b.st.last)*b.rate
	if b.st.waiting > 0 {
		t = math.Min(b.burst, t)
	} else {
		t = math.Min(idleCredit, t)
	}
	b.st.tokens, b.st.last = t, now
}

// wait notes that a link of the port has packets queued (d = +1) or none
// any more (d = -1). Time up to now accrues under the old state.
func (b *bucket) wait(now int64, d int64) {
	if b == nil {
		return
	}
	now = b.lock(now)
	b.refill(now)
	if b.st.waiting += d; b.st.waiting < 0 {
		b.st.waiting = 0
	}
	b.unlock()
}

// chunk is the least a waiting link writes at a time (unless less is
// queued): a busy poller writes chunks rather than a syscall per trickle
// of tokens, and a message no larger than a chunk is held for its whole
// serialisation time at most.
func (b *bucket) chunk(want int) float64 { return math.Min(float64(want), math.Min(b.burst/2, 64<<10)) }

// allow returns how many of want bytes may leave now: nothing until a
// chunk's worth of tokens is there, then all the tokens.
func (b *bucket) allow(now int64, want int) int {
	if b == nil {
		return want
	}
	now = b.lock(now)
	defer b.unlock()
	b.refill(now)
	if b.st.tokens < b.chunk(want) {
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

// readyAt is when a chunk of need will be allowed.
func (b *bucket) readyAt(now int64, need int) int64 {
	if b == nil {
		return now
	}
	shared := b.lock(now)
	defer b.unlock()
	b.refill(shared)
	want := b.chunk(need)
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
