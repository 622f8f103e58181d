package ib

// Credits: the user-level static flow control of seed 000 §4.2 for the
// per-peer ("P") receive queues — B-SRQ's tiny buffers (seed 002 §3) and
// every queue of the per-peer layout.
//
// A receiver posts Count buffers of a per-peer queue for each peer; the
// sender starts with Count credits and spends one per frame. Without a
// credit the frame is refused with core.ErrNoResources, and the PML keeps
// it, in order, in its queue of frames waiting for resources: that queue is
// the backlog of seed 000 §4.2, and the send request stays incomplete
// while its frame waits, so a rank that stops calling in never strands a
// frame it believes sent. The first frame accepted after a refusal carries
// the "went through backlog" bit (§4.3, the feedback a dynamic scheme
// grows on). The receiver reposts each buffer as soon as its frame is
// handled and owes the sender a credit for it; owed credits ride back in
// the header of any frame going the other way (piggybacking), and once Low
// (the credit window) are owed with nothing to ride on, an explicit credit
// frame goes out. Explicit credit frames bypass flow control — seed 000's
// optimistic scheme — but still count against the credits, so that the
// books balance: if one lands when no buffer is posted, the hardware's RNR
// NAK with infinite retry holds it until one is, and no credit is ever
// granted for a buffer that is not posted.
//
// Frames on a per-peer queue carry that queue's credits; frames on a
// shared queue carry the credits of the first per-peer queue (in B-SRQ,
// the tiny one), so bucket traffic returns tiny credits too.
//
// This is the one credit engine of the ib BTL. The flow-control issue
// generalises it (hardware, static and dynamic schemes, a policy choosing
// the threshold and growing posted buffers per peer) by driving this type:
// grant, spend and owe are the only places credits change.
type credits struct {
	avail  int  // frames this side may still send
	owed   int  // reposted buffers the peer has not been told about
	window int  // explicit credits once this many are owed
	waited bool // a frame was refused since the last one left
}

// spend takes a credit for a frame; avail goes negative only for frames
// outside flow control.
func (c *credits) spend() { c.avail-- }

// grant adds credits the peer returned.
func (c *credits) grant(n int) { c.avail += n }

// owe records a reposted buffer; it reports whether an explicit credit
// frame is due.
func (c *credits) owe() bool {
	c.owed++
	return c.owed >= c.window
}

// take returns the owed credits for a header, at most what the 16-bit
// field holds.
func (c *credits) take() uint16 {
	n := min(c.owed, 0xffff)
	c.owed -= n
	return uint16(n)
}
