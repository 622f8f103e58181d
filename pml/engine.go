package pml

import (
	"errors"
	"fmt"
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
	// chans are the virtual channels to the peers (channel.go).
	chans channels
	// match holds the contexts, their posted receives and unexpected
	// messages.
	match matcher

	// reqs is the request table: a peer names a request by its index
	// and generation (Request.id).
	reqs []*Request
	// free recycles what a message needs, so that it allocates nothing
	// in steady state.
	free struct {
		reqs   pool.Pool[Request]
		frames pool.Pool[outFrame]
	}
	scratch [1024]byte

	pendingWork  int // frames, stripes and pumps waiting on resources
	pendingRecvs int
	// rndv runs the rendezvous protocols (rendezvous.go).
	rndv   rendezvous
	async  *asyncProgress
	closed bool
	// unfused: a progress thread, virtual time, a scheduler policy or
	// Close turned the fused paths off for good — fastOK's test of all
	// four in one (set with them: New, Close).
	unfused bool
	// virtual: the clock is a simulator's (core.IdleClock), and a waiter
	// must hand it the processor instead of polling on the fused path.
	virtual bool

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
	e.rndv.e = e
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
	e.chans.init(chanConfig{size: size, opts: &e.opts, rejected: e.m.policyDropped, fail: e.failPeer}, e.mods)
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
		{core.TypeRndvReply, e.rndv.onReply},
		{core.TypeRndvFin, e.rndv.onFin},
		{core.TypeFrag, e.rndv.onFrag},
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

// lostErr is why the channel to rank r was lost, or nil (lock held). A
// rank not yet talked to is not lost.
func (e *engine) lostErr(r int) error { return e.chans.lostErr(r) }

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
		e.chans.tick(e.opts.Clock.Now())
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
	e.failPeer(e.chans.get(rank), fmt.Errorf("pml: subchannel %s to rank %d: %w", mod.attrs.Name, rank, err))
}

// failPeer completes every request that involves p with an error wrapping
// core.ErrPeerLost, including receives from AnySource that were pending (as
// ULFM does), so that nothing waits forever on a dead peer.
func (e *engine) failPeer(p *peer, err error) {
	if p.failed() != nil {
		return
	}
	if !errors.Is(err, core.ErrPeerLost) {
		err = fmt.Errorf("%w: %w", core.ErrPeerLost, err)
	}
	e.chans.markLost(p, err)
	e.m.peersLost.Inc()
	e.log.Warn().Int("peer", p.rank).Err(err).Msg("peer lost")
	for _, s := range p.subchannels() {
		s.mod.m.Disconnect(p.rank, err)
		for f := s.out.PopFront(); f != nil; f = s.out.PopFront() {
			e.frameDone(f, false)
		}
		for _, q := range []*list.List[stripe]{&s.readQ, &s.rdmaQ} {
			for st := q.PopFront(); st != nil; st = q.PopFront() {
				e.pendingWork--
				e.rndv.stripeDone(st, err)
			}
		}
	}
	e.chans.drop(p)
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
		e.failPeer(e.chans.get(int(src)), err)
	}
}
