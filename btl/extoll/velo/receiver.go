package velo

// The receiver side of the credit schemes (seed 003 §5.1, §6.5): per
// sender the retrieved-packets counter and a FIFO of credit_slots+1
// thresholds; when the counter reaches the head, the head is popped, the
// region pushes the next threshold, and that many credits are granted out
// of the free data slots and sent back in a credit packet, which itself
// needs no credit. The checks that keep any policy safe — the static
// slots' reserve, the credit region's room, a threshold within reach —
// are here (doc.go).

// retrieved is the slot management module (§6.5.1) followed by the regular
// way of the activity control module (§6.5.2): a data packet or a
// compulsory request or response from src has left the mailbox.
func (c *credits) retrieved(src int) {
	r := &c.rx[src]
	r.taken++
	c.available++
	c.setCurrent(r, r.current-1)
	r.retrieved++
	if r.retrieved >= c.fifo[c.headIdx(src)] {
		c.reach(src, false)
	}
	if r.owed > 0 {
		c.sendCredit(src)
	}
}

func (c *credits) headIdx(src int) int { return src*(c.k+1) + int(c.rx[src].head) }

// reach runs when src's current threshold has been reached: the regular
// way (retrieved == head) or the piggyback way (retrieved + piggybacked >=
// head, §6.6.1). It pops the head, pushes the next threshold and grants
// the credits due; the caller sends them.
func (c *credits) reach(src int, viaPiggyback bool) {
	r := &c.rx[src]
	hi := c.headIdx(src)
	head := c.fifo[hi]
	// Pop the head; the pushed threshold takes its place at the tail,
	// which in a ring of k+1 is the same cell.
	r.head = int32((int(r.head) + 1) % (c.k + 1))
	if r.blocked {
		// The blocked workflow (§6.5.2): credits are being taken back; give
		// one only to a sender below its static slots.
		c.fifo[hi] = 1
		r.retrieved, r.piggy = 0, 0
		if r.current < int32(c.static) {
			c.grant(src, 1)
		}
		c.live(src)
		return
	}
	r.pops++
	next := c.region.next(c, src, r)
	c.fifo[hi] = next
	// Credits due for this round: the new threshold, plus any overshoot of
	// the head, minus what was already piggybacked (adjustment by deficit).
	due := next + r.retrieved - head
	r.retrieved, r.piggy = 0, 0
	if due < 0 {
		// Adjustment by excess (§6.6.2): more went back by piggyback than
		// the new threshold; the next threshold grows by the difference.
		c.fifo[c.headIdx(src)] -= due
		due = 0
	}
	if viaPiggyback {
		c.e.m.piggyReach.Inc()
	}
	c.grant(src, due)
	c.live(src)
}

// grant takes up to n credits for src out of the free data slots, never
// into another sender's reserve, and returns how many.
func (c *credits) grant(src int, n int32) int32 {
	if n <= 0 {
		return 0
	}
	r := &c.rx[src]
	own := max(int32(c.static)-r.current, 0)
	free := int32(c.available - (c.reserve - int(own)))
	n = min(n, free)
	if n <= 0 {
		c.e.m.starved.Inc()
		return 0
	}
	c.available -= int(n)
	c.setCurrent(r, r.current+n)
	r.owed += n
	return n
}

// setCurrent updates a sender's current credits and the reserve owed to
// senders below their static slots.
func (c *credits) setCurrent(r *rxState, v int32) {
	st := int32(c.static)
	c.reserve += int(max(st-v, 0) - max(st-r.current, 0))
	r.current = v
}

// live keeps src's head threshold within reach: the sender can send at most
// its current credits more before the receiver must have answered.
func (c *credits) live(src int) {
	if c.unchecked {
		return
	}
	r := &c.rx[src]
	hi := c.headIdx(src)
	if c.fifo[hi]-r.retrieved <= r.current {
		return
	}
	c.e.m.headClamps.Inc()
	if r.current > 0 {
		c.fifo[hi] = r.retrieved + r.current
		return
	}
	// Nothing held, nothing in flight: no threshold can be reached. Reach
	// it now, which grants from the sender's reserve.
	c.fifo[hi] = r.retrieved
	c.reach(src, false)
}

// sendCredit sends src the credits owed to it in a credit packet, if the
// credit region is sure to have room for it.
func (c *credits) sendCredit(src int) {
	r := &c.rx[src]
	n := r.cps + 1 // this credit packet's number
	g := &c.guard[src*c.k+int((n-1)%int64(c.k))]
	if n > int64(c.k) && !c.unchecked && r.taken <= int64(c.initial)+*g {
		// The sender may not have read credit packet n-k yet: sending
		// would put k+1 of ours in its credit region. Keep owing.
		if !r.deferred {
			r.deferred = true
			c.e.m.deferred.Inc()
		}
		return
	}
	r.deferred = false
	*g = r.granted
	r.cps = n
	v := r.owed
	r.owed = 0
	r.granted += int64(v)
	c.e.m.creditPackets.Inc()
	c.e.m.creditsSent.Add(int64(v))
	c.e.control(src, TagCredit, v)
}

// response handles a compulsory credit return response (§6.5.4).
func (c *credits) response(src int, v int32) {
	r := &c.rx[src]
	v = min(max(v, 0), r.current)
	r.taken += int64(v)
	c.available += int(v)
	c.setCurrent(r, r.current-v)
	r.blocked = false
	c.e.m.responses.Inc()
	c.e.m.reclaimed.Add(int64(v))
	c.live(src)
	if r.owed > 0 {
		c.sendCredit(src)
	}
}
