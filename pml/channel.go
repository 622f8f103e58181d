package pml

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
	"github.com/gobtl/gobtl/pml/internal/list"
	"github.com/gobtl/gobtl/pml/internal/pool"
)

// The virtual channels of seed 001 §4.2: one per peer, made of one or
// more subchannels — any mix of modules, ports and connections — over
// which the communication scheduler (sched.go) spreads the messages.
// Every EAGER and START frame carries the channel's packet sequence
// number (PSN); the receiver expects them in order (ESN) and parks early
// arrivals in the channel's out-of-order queue (§5.2).

// module is a BTL module as the engine sees it.
type module struct {
	m        core.Module
	attrs    core.Attrs
	reg      core.Registrar
	notifier core.Notifier
	// remote: the module reaches another rank, so frames may arrive on
	// it at any time. A module that reaches this rank only (self) can
	// have an event only after the engine handed it something, which sets
	// armed; progress polls it only while armed, and disarms it once a
	// poll finds nothing.
	remote, armed bool
}

// sub is one subchannel of a virtual channel: one module's endpoint to the
// peer (seed 001 §4.2). Several may share a module's port (the LMC case)
// or come from different ports and devices; once connected they are all
// the same.
type sub struct {
	idx int
	mod *module
	ep  core.Endpoint
	// The endpoint's capability sets (core.CapsOf), nil where it has
	// none: RDMA (only from a module that registers, mod.reg), the eager
	// fast path, and back-pressure — credited, read where a small message
	// might rather go by rendezvous (PreferRendezvous), by the pipeline's
	// depth (FragsInFlight) and by the pump (Replenished).
	rdma     core.RDMA
	fast     core.Eager
	credited core.Resources
	eager    int // effective eager limit
	inline   int // effective rendezvous inline limit
	maxRDMA  int64

	out        list.List[outFrame] // frames that met ErrNoResources, in order
	readTokens int                 // RDMA reads that may still be issued
	readQ      list.List[stripe]   // reads waiting for a token (FIFO)
	rdmaQ      list.List[stripe]   // puts and gets that met ErrNoResources

	// A pipeline fragment the endpoint refused (ErrNoResources) stops
	// the pump on this subchannel: for the rest of that round, and after
	// it until the endpoint's Replenished count moves (pumpReady).
	pumpBlocked  bool
	blockedGen   uint64 // credited's Replenished count after the refusal
	blockedRound uint64 // the pump round that last found it blocked
}

// peer is the virtual channel to one rank: its subchannels, the PSN it
// stamps on matchable frames, the ESN it expects and the out-of-order queue
// (seed 001 §5.2).
type peer struct {
	rank  int
	subs  []*sub
	psn   uint32
	esn   uint32
	ooo   []*oooFrame // sorted by PSN
	lost  error
	sched schedState
	// direct is the endpoint of the only subchannel when it offers the
	// eager fast path (core.Eager): the fused receive path may poll it
	// alone, and the fused send path writes to it, up to directEager
	// bytes.
	direct      core.Eager
	directEager int
	directMod   *module // the subchannel's module, which a fused send arms
	// rndvOut counts the rendezvous sends to this rank not yet complete:
	// the queue depth a module's mechanism table (core.MechRule) weighs
	// against a single copy.
	rndvOut int
	// choice is this rank's choice, as a receiver, between RDMA and the
	// pipeline for the peer's messages (choose.go); made at its first use.
	choice chooser
}

// oooFrame is a frame that arrived before its PSN's turn, copied.
type oooFrame struct {
	h    core.Header
	data []byte
}

// channels are the virtual channels by job rank, each made when the rank
// is first sent to or heard from: at thousands of ranks a channel, its
// subchannels and the transports' endpoints for every rank would cost
// more than the job's buffers, and most pairs never talk. They keep the
// ranks found lost, in order, and the copies of out-of-order frames.
type channels struct {
	cfg   chanConfig
	mods  []*module
	peers []*peer
	// made lists the channels made, by rank, for what walks them all.
	made []*peer
	// lost are the ranks found lost, in order; contexts acknowledge a
	// prefix of it (Comm.AckFailed). nlost is its length, read outside
	// the lock, so that Comm.Lost costs nothing until a rank is lost.
	lost  []int
	nlost atomic.Int32
	ooo   pool.Pool[oooFrame]
	bufs  pool.Bytes // copies of out-of-order frames
}

// chanConfig is what the channels are built from: the options that shape
// a subchannel and the scheduling policy with what it reports to.
type chanConfig struct {
	size     int
	opts     *Options
	rejected *core.Counter // decisions of the scheduling policy dropped
	// fail fails a channel that cannot be made (the engine's failPeer).
	fail func(*peer, error)
}

// init readies c for a job of cfg.size ranks over mods.
func (c *channels) init(cfg chanConfig, mods []*module) {
	c.cfg, c.mods = cfg, mods
	c.peers = make([]*peer, cfg.size)
}

// lookup returns the channel to job rank r, nil if not made yet.
func (c *channels) lookup(r int) *peer { return c.peers[r] }

// get returns the channel to job rank r, made on first use (lock held).
// A channel that cannot be made is returned lost, with the error that
// says why.
func (c *channels) get(r int) *peer {
	if p := c.peers[r]; p != nil {
		return p
	}
	return c.add(r)
}

// add makes the channel to job rank r, failing it if it cannot be made.
func (c *channels) add(r int) *peer {
	p, err := c.open(r)
	if err != nil {
		c.cfg.fail(p, err)
	}
	return p
}

// all returns the channels made, by rank; the caller must not change the
// slice.
func (c *channels) all() []*peer { return c.made }

// open makes the channel to job rank r and files it. A channel that
// cannot be made is returned with the error that says why, for the
// caller to fail.
func (c *channels) open(r int) (*peer, error) {
	p, err := c.newPeer(r)
	c.peers[r] = p
	// made stays in rank order, the order in which every walk over the
	// channels (retries, policy ticks) has always gone.
	i, _ := slices.BinarySearchFunc(c.made, r, func(q *peer, r int) int { return q.rank - r })
	c.made = slices.Insert(c.made, i, p)
	return p, err
}

// lostErr is why the channel to rank r was lost, or nil. A rank not yet
// talked to is not lost.
func (c *channels) lostErr(r int) error {
	if p := c.peers[r]; p != nil {
		return p.lost
	}
	return nil
}

// markLost records that p is lost for err; it reports false when p was
// lost already.
func (c *channels) markLost(p *peer, err error) bool {
	if p.lost != nil {
		return false
	}
	p.lost = err
	c.nlost.Add(1)
	c.lost = append(c.lost, p.rank)
	return true
}

// lostRanks are the job ranks found lost, in order; the caller must not
// change the slice.
func (c *channels) lostRanks() []int { return c.lost }

// anyLost reports whether a rank was found lost; safe without the lock.
func (c *channels) anyLost() bool { return c.nlost.Load() != 0 }

// newPeer builds the virtual channel to rank from every module that
// reaches it, keeping only the highest exclusivity unless AllRails. It
// returns the channel even with an error, for the caller to fail.
func (c *channels) newPeer(rank int) (*peer, error) {
	p := &peer{rank: rank}
	best := -1 << 31
	allRails := c.cfg.opts.AllRails
	for _, mod := range c.mods {
		ep, err := mod.m.Endpoint(rank)
		if err != nil {
			if errors.Is(err, core.ErrUnreachable) {
				continue
			}
			return p, fmt.Errorf("pml: module %s, rank %d: %w", mod.attrs.Name, rank, err)
		}
		if !allRails && mod.attrs.Exclusivity < best {
			continue
		}
		if !allRails && mod.attrs.Exclusivity > best {
			best = mod.attrs.Exclusivity
			p.subs = p.subs[:0]
		}
		if len(p.subs) == maxSubchannels {
			return p, fmt.Errorf("pml: rank %d: more than %d subchannels", rank, maxSubchannels)
		}
		p.subs = append(p.subs, c.newSub(len(p.subs), mod, ep))
	}
	for i, s := range p.subs {
		s.idx = i
	}
	if len(p.subs) == 1 {
		s := p.subs[0]
		p.direct, p.directEager, p.directMod = s.fast, s.eager, s.mod
	}
	if len(p.subs) > 0 {
		if err := p.sched.setup(c, p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// newSub makes the subchannel of mod's endpoint ep, its limits the
// module's lowered by the options.
func (c *channels) newSub(idx int, mod *module, ep core.Endpoint) *sub {
	a, o := mod.attrs, c.cfg.opts
	s := &sub{idx: idx, mod: mod, ep: ep, eager: a.EagerLimit, inline: a.RndvEagerLimit, maxRDMA: a.MaxRDMA}
	if mod.reg != nil {
		s.rdma, _ = ep.(core.RDMA) // the RDMA set is whole or not there
	}
	s.fast, _ = ep.(core.Eager)
	s.credited, _ = ep.(core.Resources)
	if l := o.EagerLimit; l > 0 && l < s.eager {
		s.eager = l
	}
	if l := o.RndvEagerLimit; l < 0 {
		s.inline = 0
	} else if l > 0 && l < s.inline {
		s.inline = l
	}
	if s.inline > a.MaxSendSize-startFixed-maxSubchannels*keyEntry {
		s.inline = max(0, a.MaxSendSize-startFixed-maxSubchannels*keyEntry)
	}
	s.readTokens = a.MaxReads
	if m := o.MaxReads; m > 0 && (s.readTokens == 0 || m < s.readTokens) {
		s.readTokens = m
	}
	if s.readTokens == 0 {
		s.readTokens = 1 << 30
	}
	return s
}

// Where a frame stands in its channel's order.
type arrival uint8

const (
	inOrder arrival = iota // the next expected: deliver it
	early                  // ahead of the ESN: wait in the out-of-order queue
	late                   // behind the ESN: a PSN delivered already
)

// arrive says where a frame with psn stands in p's order.
func (p *peer) arrive(psn uint32) arrival {
	switch {
	case psn == p.esn:
		return inOrder
	case seqBefore(psn, p.esn):
		return late
	}
	return early
}

// seqBefore reports whether PSN a comes before b in serial-number order, so
// that the 32-bit sequence may wrap.
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

// stash copies a frame that came early into p's out-of-order queue, in
// PSN order. It reports false, keeping nothing, for a PSN already queued.
func (c *channels) stash(p *peer, h *core.Header, payload []byte) bool {
	i := len(p.ooo)
	for i > 0 && seqBefore(h.PSN, p.ooo[i-1].h.PSN) {
		i--
	}
	if i > 0 && p.ooo[i-1].h.PSN == h.PSN {
		return false
	}
	f := c.ooo.Get()
	f.h, f.data = *h, c.bufs.Get(len(payload))
	copy(f.data, payload)
	p.ooo = append(p.ooo, nil)
	copy(p.ooo[i+1:], p.ooo[i:])
	p.ooo[i] = f
	return true
}

// ready takes the frame at the head of p's out-of-order queue off it when
// its turn has come (its PSN is the ESN), else returns nil. The caller
// delivers it and hands it back (release).
func (p *peer) ready() *oooFrame {
	if len(p.ooo) == 0 || p.ooo[0].h.PSN != p.esn || p.lost != nil {
		return nil
	}
	f := p.ooo[0]
	copy(p.ooo, p.ooo[1:])
	p.ooo[len(p.ooo)-1] = nil
	p.ooo = p.ooo[:len(p.ooo)-1]
	return f
}

// release recycles f, an out-of-order frame delivered or dropped.
func (c *channels) release(f *oooFrame) {
	c.bufs.Put(f.data)
	f.data = nil
	c.ooo.Put(f)
}

// drop empties p's out-of-order queue (p is lost).
func (c *channels) drop(p *peer) {
	for _, f := range p.ooo {
		c.release(f)
	}
	p.ooo = nil
}

// delivered moves p's ESN past a frame delivered in order.
func (p *peer) delivered() { p.esn++ }

// nextPSN is the PSN the next matchable frame to p will carry.
func (p *peer) nextPSN() uint32 { return p.psn }

// tookPSN moves past the PSN of a matchable frame sent to p.
func (p *peer) tookPSN() { p.psn++ }

// expected is the PSN p's next frame must carry to be delivered.
func (p *peer) expected() uint32 { return p.esn }

// waiting is how many frames of p wait out of order.
func (p *peer) waiting() int { return len(p.ooo) }

// failed is why p was lost, or nil.
func (p *peer) failed() error { return p.lost }

// quiet reports whether p is neither lost nor holding frames out of
// order: the fused paths' test of the channel.
func (p *peer) quiet() bool { return p.lost == nil && len(p.ooo) == 0 }

// subchannels are p's subchannels; the caller must not change the slice.
func (p *peer) subchannels() []*sub { return p.subs }

// rndvInFlight counts the rendezvous sends to p not yet complete: the
// queue depth a module's mechanism table (core.MechRule) weighs against
// a single copy.
func (p *peer) rndvInFlight() int { return p.rndvOut }

// rndvBegan and rndvEnded count a rendezvous send to p in and out.
func (p *peer) rndvBegan() { p.rndvOut++ }
func (p *peer) rndvEnded() { p.rndvOut-- }

// chooser returns p's choice between RDMA and the pipeline for its
// messages (choose.go), made at its first use.
func (p *peer) chooser() chooser {
	if p.choice == nil {
		p.choice = new(mechChoice)
	}
	return p.choice
}

// tick hands each channel's batched stripe times to the scheduling
// policy and applies the weights it proposes (sched.go).
func (c *channels) tick(now time.Duration) {
	for _, p := range c.made {
		p.sched.tick(now)
	}
}

// applySched disposes of the run of decisions at the head of dec that
// name one peer: together they replace its weights, or are rejected
// together.
func (c *channels) applySched(dec []core.SchedDecision) (int, policy.Verdict) {
	peer := dec[0].Peer
	j := 0
	for j < len(dec) && dec[j].Peer == peer {
		j++
	}
	if peer < 0 || int(peer) >= len(c.peers) || c.peers[peer] == nil {
		return j, policy.Rejected
	}
	if !c.peers[peer].sched.apply(dec[:j]) {
		return j, policy.Rejected
	}
	return j, policy.Applied
}
