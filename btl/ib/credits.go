package ib

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
)

// The credit engine: flow control of seed 000 §3–5 for the per-peer ("P")
// receive queues — every queue of the per-peer layout, B-SRQ's tiny
// buffers (seed 002 §3). Shared queues have no per-peer buffers to count:
// a frame that finds their SRQ empty is held by the RNR NAK.
//
// A flow-control policy (core.FlowControl; policies/flowcontrol/ib_hardware,
// ib_static, ib_dynamic) chooses the scheme and its numbers; this file is
// the mechanism that runs them on every frame and checks every decision.
//
//   - Hardware (core.FlowNone, §4.1): no credit is counted. A frame is
//     posted at once; if the peer has no receive posted, its HCA answers
//     RNR NAK and ours retries after the peer's min_rnr_timer, rnr_retry
//     times (7: forever) — the sender is held back by the device alone.
//   - User-level static (core.FlowCredits, §4.2): a receiver posts N
//     buffers per peer; the sender starts with N credits (the number the
//     peer published at wire-up, not its own) and spends one per frame.
//     With none left the frame is refused with core.ErrNoResources and
//     waits in the backlog (below). The receiver reposts a buffer as soon
//     as its frame is handled and owes the sender a credit for it; owed
//     credits ride back in the header of every frame going the other way
//     (piggybacking), and when min(threshold, target) of them are owed and
//     nothing has carried them by the next Progress — the PML sends what
//     waited right after a Progress, and the application what it has to
//     say after the Progress that completed its receive — an explicit
//     credit frame goes out. Explicit credit frames are optimistic (§4.2:
//     "not subject to user-level flow control"): they neither wait for nor
//     spend a credit, and the receiver reposts the buffer one took without
//     owing anything for it. If one finds no buffer posted, the RNR NAK and
//     infinite retry hold it until one is; so two sides out of credits
//     cannot deadlock, and a credit frame never calls for another (were
//     they counted, a credit frame would make a credit due, whose frame
//     would make one due back, forever, once the threshold is down to one
//     buffer). The price is the paper's: a credit frame may take the buffer
//     a credited frame was counting on, which then waits on an RNR NAK
//     until the credit frame's buffer is reposted. While out of credits,
//     small messages may go by rendezvous (core.Resources): the START waits
//     instead of the data, and the handshake brings credits back.
//   - User-level dynamic (§4.3): as static, but a peer starts with few
//     buffers and a frame that waited for a credit carries core.FlagBacklog.
//     The receiver reports each one to the policy (core.FlowBacklogged),
//     which asks for more buffers for that peer (core.FlowSetQuota); the
//     engine clamps the number to [initial, max], posts the new buffers and
//     owes their credits. Beyond the paper, the engine reports a quiet peer
//     (core.FlowIdle, at 1, 2, 4, ... ms of silence) and a policy may ask
//     for fewer: a buffer is then retired instead of reposted when its
//     frame has been handled — the only moment it is neither posted nor
//     owed (a posted receive cannot be taken back from an RC QP short of
//     destroying it) — never below the initial number.
//
// The backlog is the PML's queue of refused frames: per subchannel, in
// order, retried from progress — the FIFO of §4.2 — and the send request
// stays open until its frame is posted, so a rank that stops calling in
// after its requests completed never strands a frame (a backlog inside the
// BTL did: the pipeline protocol completes a send once its fragments are
// accepted). The BTL sees the head of that queue: it refuses it, notes
// when, and marks the frame that finally goes — the one that waited — with
// the backlog bit, counting its wait. The frames queued behind it never
// reach the BTL while they wait, but the PML sends them from its queue
// with core.SendBacklog: until the queue has drained (a frame comes that
// did not wait), each of them carries the bit too, so the receiver sees
// every message that went through the backlog (§4.3), not one per stall,
// and a dynamic policy grows by one step for each.

// flowCfg is the scheme a module runs, checked at open.
type flowCfg struct {
	credits   bool // user-level credits; false: the hardware scheme
	initial   int  // buffers per peer per per-peer queue at wire-up; 0: the layout's count
	max       int  // the most a peer may grow to; 0: initial
	threshold int  // explicit credits once min(threshold, posted) are owed; 0: the layout's Low
	rndv      bool // rendezvous while out of credits
	policy    core.FlowControl
	dynamic   bool // the policy may move posted buffers: report backlogged frames and quiet peers
}

// creditEngine is a module's flow control on its per-peer queues: the
// scheme in force and its policy, the peers owed an explicit credit
// frame, with the Progress call that found each due, and which queues'
// frames spend and carry credits. It posts and retires the per-peer
// buffers through the receive side, and reaches the peers through the
// module's table.
type creditEngine struct {
	fc        flowCfg
	flow      policy.Driver[core.FlowEvent, core.FlowDecision]
	creditDue []*endpoint
	gen       uint64 // Progress calls
	// counted are the queues whose frames spend credits: the per-peer
	// ones, under the credit schemes.
	counted []bool
	// carry is, by queue, the per-peer queue whose credits its frames
	// carry: their own, or on a shared queue the first per-peer queue's
	// (-1: none).
	carry []int
	// granted counts the credit returns from peers: each may let a
	// refused frame pass (Replenished).
	granted uint64

	rx    *recvSide
	peers *peers
	clock core.Clock
	log   zerolog.Logger

	backlogged, backlogRx, creditMsgs, stalls, clamped *core.Counter
}

// open sets the engine up for module m, whose receive side is open, with
// the scheme in ce.fc.
func (ce *creditEngine) open(m *module) {
	fc := &ce.fc
	ce.rx, ce.peers, ce.clock, ce.log = &m.rx, &m.peers, m.clock, m.log
	c := func(n string) *core.Counter { return m.metrics.Counter(m.metric(n)) }
	ce.backlogged, ce.backlogRx, ce.creditMsgs = c("backlogged"), c("backlogged_received"), c("credit_messages")
	ce.stalls, ce.clamped = c("flow_control_stalls"), c("flow_decisions_clamped")
	for i, q := range m.rx.queues {
		ce.counted = append(ce.counted, !q.shared && fc.credits)
		ci := i
		if q.shared {
			ci = m.rx.firstP
		}
		ce.carry = append(ce.carry, ci)
	}
	ce.flow.Init(policy.Config[core.FlowEvent, core.FlowDecision]{Policy: fc.policy, Apply: policy.Each(ce.apply), Clock: ce.clock,
		Clamped: ce.clamped, Rejected: m.rejected})
}

// idleFirst is the silence after which a quiet peer is first reported to
// a dynamic policy; reports follow at twice, four times, ... that.
const idleFirst = time.Millisecond

// resolveFlow asks the job's flow-control policy for its scheme and checks
// it. Without a policy the module runs static credits with the receive
// layout's numbers, as it always has.
func resolveFlow(env core.BTLEnv, c *config, firstPBuf int) (flowCfg, error) {
	if env.FlowControl == nil {
		return flowCfg{credits: true, rndv: c.rndvOnNoCredit}, nil
	}
	if env.Params.IsSet("rndv_on_no_credit") {
		return flowCfg{}, fmt.Errorf("ib: rndv_on_no_credit is set and a flow-control policy is configured: set it in the policy block")
	}
	s, err := env.FlowControl.Setup(core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: env.Boot.Size(), Senders: env.Boot.Size() - 1, BufferSize: firstPBuf})
	if err != nil {
		return flowCfg{}, fmt.Errorf("ib: flow-control policy: %w", err)
	}
	if s.CreditSlots != 0 || s.DynamicRegion {
		return flowCfg{}, fmt.Errorf("ib: the flow-control policy asks for credit slots or a dynamic region, which a slot pool has: it is not a policy for posted buffers")
	}
	f := flowCfg{policy: env.FlowControl, initial: s.Quota, max: s.MaxQuota, threshold: s.CreditThreshold, rndv: s.RndvOnNoCredit}
	switch s.Scheme {
	case core.FlowNone:
		if s.RndvOnNoCredit || s.MaxQuota > max(s.Quota, 0) {
			return flowCfg{}, fmt.Errorf("ib: the hardware scheme counts no credits: no rendezvous for lack of them, no growth")
		}
	case core.FlowCredits:
		f.credits = true
	default:
		return flowCfg{}, fmt.Errorf("ib: unknown flow-control scheme %d", s.Scheme)
	}
	switch {
	case s.Quota < 0 || s.MaxQuota < 0 || s.CreditThreshold < 0:
		return flowCfg{}, fmt.Errorf("ib: flow-control policy: negative buffer counts or threshold (%d, %d, %d)", s.Quota, s.MaxQuota, s.CreditThreshold)
	case s.Quota > 0xffff || s.MaxQuota > 0xffff:
		return flowCfg{}, fmt.Errorf("ib: flow-control policy: at most 65535 buffers per peer (the header's credit field)")
	case s.MaxQuota > 0 && s.MaxQuota < s.Quota:
		return flowCfg{}, fmt.Errorf("ib: flow-control policy: max quota %d below the quota %d", s.MaxQuota, s.Quota)
	case s.RNRRetry < 0 || s.RNRRetry > 7:
		return flowCfg{}, fmt.Errorf("ib: flow-control policy: rnr_retry %d not in [0, 7]", s.RNRRetry)
	}
	f.dynamic = f.credits && s.MaxQuota > s.Quota
	if s.RNRRetry > 0 {
		if env.Params.IsSet("rnr_retry") && int(c.rnrRetry) != s.RNRRetry {
			return flowCfg{}, fmt.Errorf("ib: rnr_retry is %d in the btl block and %d in the flow-control policy: set it in one place", c.rnrRetry, s.RNRRetry)
		}
		c.rnrRetry = uint8(s.RNRRetry)
	}
	if s.MinRNRTimer > 0 {
		if env.Params.IsSet("min_rnr_timer") {
			return flowCfg{}, fmt.Errorf("ib: min_rnr_timer is set in the btl block and in the flow-control policy: set it in one place")
		}
		c.minRNR = verbs.RNRTimerCode(s.MinRNRTimer)
	}
	return f, nil
}

// credits is the engine's state for one per-peer queue of one peer, both
// directions.
type credits struct {
	// Sender side: frames this side may still send into the peer's
	// buffers, and whether and since when a frame has been refused for
	// lack of one.
	avail     int
	held      bool
	heldSince time.Duration
	// draining: a stall ended and the frames that waited behind its head
	// are still coming out of the backlog.
	draining bool
	// Receiver side: buffers assigned to the peer (posted, or holding a
	// frame being handled), the number the policy wants, credits owed for
	// reposted or new buffers, and the most ever assigned.
	posted, target, owed, maxPosted int
}

// spend takes a credit for a frame.
func (c *credits) spend() { c.avail-- }

// grant adds credits the peer returned.
func (c *credits) grant(n int) { c.avail += n }

// grant adds n credits the peer returned for e's per-peer queue ci: a
// frame refused for want of one may pass now (Replenished).
func (ce *creditEngine) grant(e *endpoint, ci, n int) {
	e.cred[ci].grant(n)
	ce.granted++
	e.st.credits.Set(int64(e.cred[ci].avail))
}

// due reports whether an explicit credit frame should go: threshold
// credits are owed, or as many as the peer is meant to have (then it may
// have none left and be waiting: with a threshold above the posted count,
// waiting for the threshold would deadlock). While a peer shrinks, its
// target is below what is posted, and the credits owed go back at once:
// the buffers it gives up come out of the credits it holds, not out of
// those it waits for.
func (c *credits) due(threshold int) bool {
	return c.owed > 0 && c.owed >= min(threshold, c.target)
}

// take returns the owed credits for a header, at most what the 16-bit
// field holds.
func (c *credits) take() uint16 {
	n := min(c.owed, 0xffff)
	c.owed -= n
	return uint16(n)
}

// refused notes a frame refused for lack of a credit on queue qi: the
// start of a stall.
func (e *endpoint) refused(qi int) {
	c := &e.cred[qi]
	if !c.held {
		c.held, c.heldSince = true, e.m.credit.clock.Now()
		e.m.credit.stalls.Inc()
		e.st.stalls.Inc()
	}
}

// released returns the header flag of a frame going now on queue qi: the
// backlog bit if it waited for a credit — the head of a stall that ends
// now, or, queued (sent from the backlog), one that waited behind it.
func (e *endpoint) released(qi int, queued bool) core.Flag {
	c := &e.cred[qi]
	if !c.held {
		if !queued || !c.draining {
			c.draining = false
			return 0
		}
		e.st.waited.Inc()
		e.m.credit.backlogged.Inc()
		return core.FlagBacklog
	}
	c.held, c.draining = false, true
	wait := e.m.credit.clock.Now() - c.heldSince
	e.st.waited.Inc()
	e.st.waitNs.Add(int64(wait))
	if int64(wait) > e.st.waitMax.Load() {
		e.st.waitMax.Set(int64(wait))
	}
	e.m.credit.backlogged.Inc()
	return core.FlagBacklog
}

// ---- receiver side ----

// backlogIn counts a frame from e on queue qi that waited for a credit
// (core.FlagBacklog) and tells a dynamic policy of one on a per-peer
// queue (seed 000 §4.3).
func (ce *creditEngine) backlogIn(e *endpoint, qi uint8) {
	ce.backlogRx.Inc()
	if ce.fc.dynamic && !ce.rx.queues[qi].shared {
		ce.flow.Event(core.FlowEvent{Kind: core.FlowBacklogged, Peer: int32(e.rank),
			Quota: int32(e.cred[qi].target), Value: 1, At: ce.clock.Now()})
	}
}

// postPerPeer posts a peer's buffers on every per-peer queue.
func (ce *creditEngine) postPerPeer(e *endpoint) error {
	for i, q := range ce.rx.queues {
		if q.shared {
			continue
		}
		c := &e.cred[i]
		c.target = q.count
		// The first buffers are the peer's initial credits, not owed ones.
		if err := ce.grow(e, i, q.count, false); err != nil {
			return err
		}
		if i == ce.rx.firstP {
			e.st.credits.Set(int64(c.avail))
		}
	}
	return nil
}

// reclaim handles a per-peer buffer whose frame has been handled: it is
// reposted and, if the frame spent a credit, the credit is owed; or it is
// retired when the policy wants fewer buffers for the peer than it has.
func (ce *creditEngine) reclaim(e *endpoint, b *recvBuf, idx int, credited bool) {
	c := &e.cred[b.queue]
	if c.posted > c.target && credited {
		c.posted--
		ce.rx.retire(b, idx)
		e.st.posted.Add(-1)
		return
	}
	ce.rx.repost(b, idx, e)
	if !ce.fc.credits || !credited || e.state == epFailed {
		return
	}
	ce.owe(e, int(b.queue), 1)
}

// owe records n credits owed to e on per-peer queue qi.
func (ce *creditEngine) owe(e *endpoint, qi, n int) {
	c := &e.cred[qi]
	was := c.due(ce.rx.queues[qi].threshold)
	c.owed += n
	ce.checkDue(e, qi, was)
}

// checkDue puts e on the list of peers owed an explicit credit frame when
// its credits on queue qi became due (they were not, was), to go at the
// next Progress if nothing carries them before.
func (ce *creditEngine) checkDue(e *endpoint, qi int, was bool) {
	if was || !e.cred[qi].due(ce.rx.queues[qi].threshold) {
		return
	}
	e.dueGen = ce.gen
	if !e.creditIn {
		e.creditIn = true
		ce.creditDue = append(ce.creditDue, e)
	}
}

// grow posts n more buffers of per-peer queue qi for e and, if owe, owes
// the peer their credits (buffers posted at wire-up are the credits the
// peer starts with).
func (ce *creditEngine) grow(e *endpoint, qi, n int, owe bool) error {
	q := ce.rx.queues[qi]
	if short := n - len(q.pool); short > 0 {
		// Register in chunks, so that growing by one at a time does not
		// register one buffer at a time.
		if err := ce.rx.alloc(q, max(short, min(16, q.maxPosted))); err != nil {
			return err
		}
	}
	c := &e.cred[qi]
	for range n {
		idx := q.pool[len(q.pool)-1]
		q.pool = q.pool[:len(q.pool)-1]
		b := ce.rx.bufs[idx]
		b.ep = e
		if err := ce.rx.post(b, int(idx), e); err != nil {
			b.ep = nil
			q.pool = append(q.pool, idx)
			return err
		}
		c.posted++
		e.st.posted.Add(1)
	}
	if c.posted > c.maxPosted {
		c.maxPosted = c.posted
		if int64(c.posted) > e.st.postedMax.Load() {
			e.st.postedMax.Set(int64(c.posted))
		}
	}
	if owe && ce.fc.credits {
		ce.owe(e, qi, n)
	}
	return nil
}

// returnCredits sends explicit credit frames where credits became due
// during an earlier Progress and nothing has carried them back since —
// neither the frames the PML sent after that Progress nor those the
// application sent once its receive completed (seed 000 §4.2: "there is
// still no message sent by the MPI layer to the other side").
func (ce *creditEngine) returnCredits() {
	for _, e := range ce.creditDue {
		if e.dueGen == ce.gen {
			continue // due since this Progress: give the PML a turn
		}
		e.creditIn = false
		if e.state != epConnected {
			continue
		}
		for i := range e.cred {
			c := &e.cred[i]
			if !ce.rx.queues[i].shared && c.due(ce.rx.queues[i].threshold) && !e.sendCredits(i) {
				// No send buffer now: try again next time.
				e.creditIn = true
			}
		}
	}
	k := 0
	for _, e := range ce.creditDue {
		if e.creditIn {
			ce.creditDue[k] = e
			k++
		}
	}
	clear(ce.creditDue[k:])
	ce.creditDue = ce.creditDue[:k]
}

// ---- the policy ----

// apply checks and applies one of the policy's decisions: buffers only
// for a connected peer, within [initial, max] of each per-peer queue (a
// clamp is reported back to the policy); a threshold of at least one; a
// quiet statement about one of the job's ranks, which asks for nothing.
// Anything else is rejected.
func (ce *creditEngine) apply(d core.FlowDecision) policy.Verdict {
	switch d.Kind {
	case core.FlowQuiet:
		// For a plugin host, which keeps the points it names from the
		// plugin (core.FlowQuiet); the module reports them all the same.
		if d.Peer < 0 || int(d.Peer) >= len(ce.peers.eps) {
			return policy.Rejected
		}
		return policy.Applied
	case core.FlowSetQuota:
		e := ce.flowPeer(d.Peer)
		if e == nil || !ce.fc.credits {
			return policy.Rejected
		}
		v := policy.Applied
		for i, q := range ce.rx.queues {
			if q.shared {
				continue
			}
			n := int(min(max(d.Value, int64(q.count)), int64(q.maxPosted)))
			if int64(n) != d.Value {
				v = policy.Clamped
				ce.flow.Event(core.FlowEvent{Kind: core.FlowQuota, Peer: d.Peer, Quota: int32(n), At: ce.clock.Now()})
			}
			c := &e.cred[i]
			was := c.due(q.threshold)
			c.target = n
			if n > c.posted {
				if err := ce.grow(e, i, n-c.posted, true); err != nil {
					ce.log.Warn().Err(err).Int("peer", e.rank).Msg("posting more receive buffers")
					c.target = c.posted
				}
			} else {
				ce.checkDue(e, i, was)
			}
		}
		return v
	case core.FlowSetThreshold:
		if d.Value < 1 || d.Value > 0xffff || !ce.fc.credits {
			return policy.Rejected
		}
		for _, q := range ce.rx.queues {
			q.threshold = int(d.Value)
		}
		return policy.Applied
	}
	return policy.Rejected
}

// flowPeer is the connected endpoint a decision names, or nil.
func (ce *creditEngine) flowPeer(p int32) *endpoint {
	if p < 0 || int(p) >= len(ce.peers.eps) {
		return nil
	}
	e := ce.peers.eps[p]
	if e == nil || e.state != epConnected {
		return nil
	}
	return e
}

// idleReports tells a dynamic policy about peers above their initial
// buffers that have sent nothing for a while: at idleFirst of silence,
// then each time the silence doubles. It reads a per-peer frame count
// instead of the clock on every frame, so its resolution is the
// housekeeping interval.
func (ce *creditEngine) idleReports(now time.Duration) {
	for _, e := range ce.peers.made {
		if e.state != epConnected || ce.rx.firstP < 0 {
			continue
		}
		if e.rxFrames != e.rxSeen {
			e.rxSeen, e.quietSince, e.idleNext = e.rxFrames, now, idleFirst
			continue
		}
		c := &e.cred[ce.rx.firstP]
		if c.target <= ce.rx.queues[ce.rx.firstP].count {
			continue
		}
		if quiet := now - e.quietSince; quiet >= e.idleNext {
			ce.flow.Event(core.FlowEvent{Kind: core.FlowIdle, Peer: int32(e.rank), Quota: int32(c.target), Value: int64(quiet), At: now})
			e.idleNext *= 2
		}
	}
}
