package pml

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml/internal/list"
	"github.com/gobtl/gobtl/pml/internal/pool"
)

// Options configure the protocol engine. The zero value is usable.
type Options struct {
	// Protocol for messages above the eager limit; default ProtoRead. The
	// engine falls back to ProtoPipeline for a message when no subchannel to
	// the peer has the RDMA capability the protocol needs.
	Protocol Protocol
	// EagerLimit caps every module's eager limit; 0 keeps the modules'.
	EagerLimit int
	// RndvEagerLimit caps the bytes sent inline with a rendezvous start:
	// 0 keeps the modules' values, a negative value sends none inline.
	RndvEagerLimit int
	// AllRails uses every module that reaches a peer; by default only those
	// of the highest exclusivity are used (shared memory, not the network,
	// for a local peer), as in Open MPI.
	AllRails bool
	// MaxReads caps outstanding RDMA reads per endpoint (the token bucket
	// of seed 004 §4.2); 0 keeps the modules' MaxReads.
	MaxReads int
	// Backoff shapes how a waiting caller polls.
	Backoff Backoff
	// Scheduler is the multirail scheduling policy; nil means round robin
	// for small messages and even striping for large ones.
	Scheduler core.Scheduler
	// FinalizeTimeout bounds how long Close waits for owed work to leave
	// and for the other ranks to close; default 30s.
	FinalizeTimeout time.Duration
	// StallTimeout bounds how long a blocking call waits while no module
	// reports any event at all; it then returns an error wrapping
	// core.ErrStalled and leaves the request pending (Wait again, or
	// Cancel). 0 waits forever. Use it where a transport can stall
	// silently, e.g. EXTOLL without flow control (seed 003 §4).
	StallTimeout time.Duration
	// LocalRank and LocalRanks place this process among the ranks on its
	// host (for per-process binding).
	LocalRank, LocalRanks int
	Clock                 core.Clock
	// Log is the PML's logger; the caller names the component (gobtl.Init
	// passes conf's logger for "pml").
	Log     zerolog.Logger
	Metrics *core.Metrics
}

// aborted returns the error Comm.Abort set, or nil.
func (e *engine) aborted() error {
	if p := e.abort.Load(); p != nil {
		return *p
	}
	return nil
}

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

type oooFrame struct {
	h    core.Header
	data []byte
}

// engine is the state shared by a communicator and its duplicates.
type engine struct {
	mu engineLock
	// round is the collective whose round a goroutine waits in WaitRound
	// (the latest, when several do), for the state reports.
	round fmt.Stringer
	// abort, once set by Comm.Abort (from any goroutine), is what every
	// blocking call returns instead of waiting on.
	abort atomic.Pointer[error]
	rank  int
	size  int
	opts  Options
	log   zerolog.Logger

	// nlost counts lost peers, so that Comm.Lost costs nothing until one
	// is.
	nlost atomic.Int32
	// failed is the first failure of this rank's operations that may
	// leave its peers waiting on it (lost.go): Close then meets them only
	// briefly.
	failed atomic.Pointer[error]
	// events counts what progress has handled, by any goroutine (lock
	// held): a waiter whose own poll found nothing, but whose operations
	// (Start) polled and found something while it advanced them, is
	// making progress and must not back off into sleeping. A plain
	// counter read under the lock, not an atomic one read outside it: an
	// atomic add on every productive poll is a locked instruction on the
	// eager path, and the waiters take the lock anyway.
	events uint64
	// ops are the Requests of operations above the PML (Start); opMu
	// guards ops and lets one goroutine at a time advance them.
	opMu sync.Mutex
	ops  []*Request
	nops atomic.Int32

	mods []*module
	// peers are the virtual channels by job rank, each made when the
	// rank is first sent to or heard from (peer): at thousands of ranks
	// a channel, its subchannels and the transports' endpoints for every
	// rank would cost more than the job's buffers, and most pairs never
	// talk. made lists those made, by rank, for what walks them all.
	peers []*peer
	made  []*peer
	// match holds the contexts, their posted receives and unexpected
	// messages.
	match matcher

	// reqs is the request table: a peer names a request by its index
	// and generation (Request.id).
	reqs []*Request
	// free recycles what a message needs, so that it allocates nothing
	// in steady state.
	free struct {
		reqs    pool.Pool[Request]
		frames  pool.Pool[outFrame]
		stripes pool.Pool[stripe]
		rdma    pool.Pool[rdmaState]
		ooo     pool.Pool[oooFrame]
	}
	bufs    pool.Bytes // copies of out-of-order frames
	scratch [1024]byte

	pendingWork  int                // frames, stripes and pumps waiting on resources
	pumps        list.List[Request] // pipelined sends with fragments to go, in the order their replies came
	pumpRound    uint64             // pump calls so far (sub.pumpReady)
	pendingRecvs int
	// lost are the ranks found lost, in order (failPeer); contexts
	// acknowledge a prefix of it.
	lost   []int
	async  *asyncProgress
	closed bool
	// unfused: a progress thread, virtual time, a scheduler policy or
	// Close turned the fused paths off for good — fastOK's test of all
	// four in one (set with them: New, Close).
	unfused bool
	// virtual: the clock is a simulator's (core.IdleClock), and a waiter
	// must hand it the processor instead of polling on the fused path.
	virtual bool
	msgSeq  uint64

	m metrics
	// bo is what the back-off keeps from one wait to the next (backoff.go).
	bo backoffState
	// hot counts what every eager message counts, under the engine lock
	// without an atomic add each; flushMetrics publishes it.
	hot struct {
		eagerSends, bytesSent, bytesRecv int64
		fused                            int64 // receives the fused path completed
		fusedSends                       int64 // sends the fused path wrote
		fusedReleased                    int64 // of fused, those Waitall released at once (takeFastRun)
		polls                            uint32
	}
}

// flushMetrics adds the engine's hot counts to the registry (lock held).
func (e *engine) flushMetrics() {
	h := &e.hot
	if h.eagerSends != 0 {
		e.m.eagerSends.Add(h.eagerSends)
		h.eagerSends = 0
	}
	if h.bytesSent != 0 {
		e.m.bytesSent.Add(h.bytesSent)
		h.bytesSent = 0
	}
	if h.bytesRecv != 0 {
		e.m.bytesRecv.Add(h.bytesRecv)
		h.bytesRecv = 0
	}
	if h.fused != 0 {
		e.m.fused.Add(h.fused)
		h.fused = 0
	}
	if h.fusedSends != 0 {
		e.m.fusedSends.Add(h.fusedSends)
		h.fusedSends = 0
	}
	if h.fusedReleased != 0 {
		e.m.fusedReleased.Add(h.fusedReleased)
		h.fusedReleased = 0
	}
}

type metrics struct {
	eagerSends, rndvSends, pipelineSends *core.Counter
	bytesSent, bytesRecv                 *core.Counter
	unexpected, ooo, badFrames, stripes  *core.Counter
	retries, peersLost, truncated        *core.Counter
	policyDropped                        *core.Counter
	fused, fusedSends, fusedReleased     *core.Counter
	declined                             *core.Counter
}

func newMetrics(m *core.Metrics) metrics {
	c := func(n string) *core.Counter { return m.Counter("pml." + n) }
	return metrics{
		eagerSends: c("eager_sends"), rndvSends: c("rndv_sends"), pipelineSends: c("pipeline_sends"),
		bytesSent: c("bytes_sent"), bytesRecv: c("bytes_recv"),
		unexpected: c("unexpected"), ooo: c("out_of_order"), badFrames: c("bad_frames"), stripes: c("stripes"),
		retries: c("resource_retries"), peersLost: c("peers_lost"), truncated: c("truncated"),
		policyDropped: c("policy_decisions_dropped"), fused: c("fused_recvs"), fusedSends: c("fused_sends"),
		fusedReleased: c("fused_released"), declined: c("rdma_declined"),
	}
}

// New builds a communicator over modules for this rank of a job of size
// ranks. The virtual channel to a rank, with the modules' endpoints to
// it, is made when the rank is first sent to or heard from; the
// transports connect on first use too.
func New(rank, size int, modules []core.Module, opts Options) (*Comm, error) {
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("pml: rank %d outside a job of %d", rank, size)
	}
	if opts.Protocol == 0 {
		opts.Protocol = ProtoRead
	}
	if opts.Protocol >= protoEnd {
		return nil, fmt.Errorf("pml: unknown protocol %d", opts.Protocol)
	}
	b := &opts.Backoff
	if own := b.OwnCore; (Backoff{OwnCore: own}) == *b {
		*b = DefaultBackoff
		b.OwnCore = own
	}
	if b.Sleep <= 0 {
		b.Sleep = DefaultBackoff.Sleep
	}
	if b.MaxSleep < b.Sleep {
		b.MaxSleep = b.Sleep
	}
	if opts.Clock == nil {
		opts.Clock = core.SystemClock
	}
	if opts.FinalizeTimeout <= 0 {
		opts.FinalizeTimeout = 30 * time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = core.NewMetrics()
	}
	e := &engine{rank: rank, size: size, opts: opts, log: opts.Log}
	e.m = newMetrics(opts.Metrics)
	e.match.init(e.m.unexpected)
	_, e.virtual = opts.Clock.(core.IdleClock)
	for _, m := range modules {
		mod := &module{m: m, attrs: m.Attrs()}
		mod.reg, _ = m.(core.Registrar)
		mod.notifier, _ = m.(core.Notifier)
		e.mods = append(e.mods, mod)
		if err := e.register(mod); err != nil {
			return nil, err
		}
	}
	for _, mod := range e.mods {
		if err := e.probe(mod); err != nil {
			return nil, err
		}
	}
	e.peers = make([]*peer, size)
	if opts.Protocol == ProtoReadAsync {
		e.mu.disable() // the progress thread would revoke a bias at once
		e.async = startAsync(e)
	}
	e.unfused = e.async != nil || e.virtual || opts.Scheduler != nil
	c := e.newComm(0, nil, rank, size)
	c.owner = true
	return c, nil
}

func (e *engine) register(mod *module) error {
	m := mod.m
	for _, reg := range []struct {
		t core.FrameType
		h core.Handler
	}{
		{core.TypeEager, e.onMatchable},
		{core.TypeRndvStart, e.onMatchable},
		{core.TypeRndvReply, e.onReply},
		{core.TypeRndvFin, e.onFin},
		{core.TypeFrag, e.onFrag},
	} {
		if err := m.Register(reg.t, reg.h); err != nil {
			return fmt.Errorf("pml: module %s: %w", mod.attrs.Name, err)
		}
	}
	m.OnPeerLost(func(rank int, err error) { e.subLost(mod, rank, err) })
	return nil
}

// probe finds whether mod reaches a rank other than this one — then
// frames may arrive on it at any time and progress polls it always — by
// asking for endpoints to the next ranks until one is reachable: one
// question for a network module, all of them only for one that reaches
// no other rank (self).
func (e *engine) probe(mod *module) error {
	for i := 1; i < e.size && !mod.remote; i++ {
		r := (e.rank + i) % e.size
		_, err := mod.m.Endpoint(r)
		switch {
		case err == nil:
			mod.remote = true
		case !errors.Is(err, core.ErrUnreachable):
			return fmt.Errorf("pml: module %s, rank %d: %w", mod.attrs.Name, r, err)
		}
	}
	return nil
}

// peer returns the virtual channel to job rank r, made on first use
// (lock held). A channel that cannot be made is returned lost, with the
// error that says why.
func (e *engine) peer(r int) *peer {
	if p := e.peers[r]; p != nil {
		return p
	}
	return e.addPeer(r)
}

// addPeer makes the virtual channel to rank r (lock held).
func (e *engine) addPeer(r int) *peer {
	p, err := e.newPeer(r)
	e.peers[r] = p
	// made stays in rank order, the order in which every walk over the
	// channels (retries, policy ticks) has always gone.
	i, _ := slices.BinarySearchFunc(e.made, r, func(q *peer, r int) int { return q.rank - r })
	e.made = slices.Insert(e.made, i, p)
	if err != nil {
		e.failPeer(p, err)
	}
	return p
}

// lostErr is why the channel to rank r was lost, or nil (lock held). A
// rank not yet talked to is not lost.
func (e *engine) lostErr(r int) error {
	if p := e.peers[r]; p != nil {
		return p.lost
	}
	return nil
}

// newPeer builds the virtual channel to rank from every module that
// reaches it, keeping only the highest exclusivity unless AllRails. It
// returns the channel even with an error, for the caller to fail.
func (e *engine) newPeer(rank int) (*peer, error) {
	p := &peer{rank: rank}
	best := -1 << 31
	for _, mod := range e.mods {
		ep, err := mod.m.Endpoint(rank)
		if err != nil {
			if errors.Is(err, core.ErrUnreachable) {
				continue
			}
			return p, fmt.Errorf("pml: module %s, rank %d: %w", mod.attrs.Name, rank, err)
		}
		if !e.opts.AllRails && mod.attrs.Exclusivity < best {
			continue
		}
		if !e.opts.AllRails && mod.attrs.Exclusivity > best {
			best = mod.attrs.Exclusivity
			p.subs = p.subs[:0]
		}
		if len(p.subs) == maxSubchannels {
			return p, fmt.Errorf("pml: rank %d: more than %d subchannels", rank, maxSubchannels)
		}
		p.subs = append(p.subs, e.newSub(len(p.subs), mod, ep))
	}
	for i, s := range p.subs {
		s.idx = i
	}
	if len(p.subs) == 1 {
		s := p.subs[0]
		p.direct, p.directEager, p.directMod = s.fast, s.eager, s.mod
	}
	if len(p.subs) > 0 {
		if err := p.sched.setup(e, p); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (e *engine) newSub(idx int, mod *module, ep core.Endpoint) *sub {
	a := mod.attrs
	s := &sub{idx: idx, mod: mod, ep: ep, eager: a.EagerLimit, inline: a.RndvEagerLimit, maxRDMA: a.MaxRDMA}
	if mod.reg != nil {
		s.rdma, _ = ep.(core.RDMA) // the RDMA set is whole or not there
	}
	s.fast, _ = ep.(core.Eager)
	s.credited, _ = ep.(core.Resources)
	if l := e.opts.EagerLimit; l > 0 && l < s.eager {
		s.eager = l
	}
	if l := e.opts.RndvEagerLimit; l < 0 {
		s.inline = 0
	} else if l > 0 && l < s.inline {
		s.inline = l
	}
	if s.inline > a.MaxSendSize-startFixed-maxSubchannels*keyEntry {
		s.inline = max(0, a.MaxSendSize-startFixed-maxSubchannels*keyEntry)
	}
	s.readTokens = a.MaxReads
	if m := e.opts.MaxReads; m > 0 && (s.readTokens == 0 || m < s.readTokens) {
		s.readTokens = m
	}
	if s.readTokens == 0 {
		s.readTokens = 1 << 30
	}
	return s
}

// progress polls every module once and retries work that waited for
// resources (lock held). It returns how many events it handled.
func (e *engine) progress() int {
	n := 0
	for _, m := range e.mods {
		if !m.remote {
			if !m.armed {
				continue
			}
			k := m.m.Progress()
			m.armed = k > 0
			n += k
			continue
		}
		n += m.m.Progress()
	}
	if e.pendingWork > 0 {
		n += e.retry()
	}
	if e.opts.Scheduler != nil {
		e.pollScheduler()
	}
	e.events += uint64(n)
	if e.hot.polls++; e.hot.polls&63 == 0 {
		e.flushMetrics()
	}
	return n
}

// subLost fails the virtual channel to rank when one of its subchannels
// fails: a frame in flight on the dead subchannel may be lost, and with it
// a PSN the receiver would wait for forever, so the channel cannot be
// trusted any more (seed 001 leaves fail-over to future work).
func (e *engine) subLost(mod *module, rank int, err error) {
	if rank < 0 || rank >= e.size {
		return
	}
	e.failPeer(e.peer(rank), fmt.Errorf("pml: subchannel %s to rank %d: %w", mod.attrs.Name, rank, err))
}

// failPeer completes every request that involves p with an error wrapping
// core.ErrPeerLost, including receives from AnySource that were pending (as
// ULFM does), so that nothing waits forever on a dead peer.
func (e *engine) failPeer(p *peer, err error) {
	if p.lost != nil {
		return
	}
	if !errors.Is(err, core.ErrPeerLost) {
		err = fmt.Errorf("%w: %w", core.ErrPeerLost, err)
	}
	p.lost = err
	e.nlost.Add(1)
	e.lost = append(e.lost, p.rank)
	e.m.peersLost.Inc()
	e.log.Warn().Int("peer", p.rank).Err(err).Msg("peer lost")
	for _, s := range p.subs {
		s.mod.m.Disconnect(p.rank, err)
		for f := s.out.PopFront(); f != nil; f = s.out.PopFront() {
			e.frameDone(f, false)
		}
		for _, q := range []*list.List[stripe]{&s.readQ, &s.rdmaQ} {
			for st := q.PopFront(); st != nil; st = q.PopFront() {
				e.pendingWork--
				e.stripeDone(st, err)
			}
		}
	}
	for _, f := range p.ooo {
		e.freeOOO(f)
	}
	p.ooo = nil
	for _, r := range e.reqs {
		if r.done || r.gen == 0 {
			continue
		}
		switch {
		case r.kind == reqSend && r.peer == p.rank,
			r.posted() && (r.peer == p.rank || r.peer == AnySource),
			r.kind == reqRecv && !r.posted() && r.src == p.rank:
			e.failRequest(r, err)
		}
	}
}

// failRequest completes r with err and unhooks it from queues.
func (e *engine) failRequest(r *Request, err error) {
	if r.posted() {
		e.match.context(r.ctx).unpost(r)
	}
	e.complete(r, err)
}

// badFrame handles a PML payload that failed validation: counted, logged,
// and the connection it came on is failed. It never reaches a receive.
func (e *engine) badFrame(src int32, err error) {
	e.m.badFrames.Inc()
	e.log.Error().Int32("peer", src).Err(err).Msg("bad frame")
	if src >= 0 && int(src) < e.size {
		e.failPeer(e.peer(int(src)), err)
	}
}
