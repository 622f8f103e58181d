// Package inproc is an in-process fabric: N ranks in one process, each
// with one module per rail, connected by lock-free single-producer rings
// (one per direction, pair and rail). It exists to test the PML and the
// things above it without processes or devices: several subchannels per
// peer, one-sided put/get served by the initiator as a NIC would (the
// target never calls in), solicited-event notification, and fault hooks —
// delay a link, jitter it so frames on different rails overtake each
// other, drop a connection.
//
// A frame is copied into a ring slot on Send and delivered by the
// receiver's Progress once its delivery time has come; a full ring is
// core.ErrNoResources. Put and Get copy at once and report completion
// through the initiator's Progress after the link's delay.
//
// Opened as the component btl "inproc", the ranks of a job find their
// fabric by the job id their bootstrap gives (the first rank in the
// process creates it) and publish this process's address through the
// bootstrap like any BTL; a peer that published another process's address
// is unreachable. Tests of the PML use a Fabric directly (New, Rail,
// Modules), with no bootstrap at all.
package inproc

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobtl/gobtl/core"
)

// RailOptions describe one rail. Zero fields take the defaults.
type RailOptions struct {
	EagerLimit     int            // default 4 KiB
	MaxSendSize    int            // default 16 KiB
	RndvEagerLimit int            // default 1 KiB; negative: none
	Slots          int            // ring slots per link; default 64
	MaxRDMA        int64          // largest put/get; 0: no limit
	MaxReads       int            // outstanding gets per endpoint; default 16
	NoRDMA         bool           // no put/get: the PML uses its pipeline
	Mech           core.MechTable // the mechanism table the module proposes (Attrs.Mech); nil: none
	MechExchange   core.MechTable // its table for exchanges (Attrs.MechExchange); nil: Mech
	Bandwidth      float64
	Latency        time.Duration
	Exclusivity    int
}

func (o *RailOptions) defaults() {
	if o.EagerLimit == 0 {
		o.EagerLimit = 4 << 10
	}
	if o.MaxSendSize == 0 {
		o.MaxSendSize = 16 << 10
	}
	if o.RndvEagerLimit == 0 {
		o.RndvEagerLimit = 1 << 10
	}
	if o.RndvEagerLimit < 0 {
		o.RndvEagerLimit = 0
	}
	if o.Slots == 0 {
		o.Slots = 64
	}
	if o.MaxReads == 0 {
		o.MaxReads = 16
	}
	if o.Bandwidth == 0 {
		o.Bandwidth = 5e9
	}
	if o.Latency == 0 {
		o.Latency = time.Microsecond
	}
}

// Fabric connects n ranks in one process.
type Fabric struct {
	n     int
	clock core.Clock

	mu    sync.Mutex
	rails []*rail
	names map[string]int
}

type rail struct {
	name  string
	opts  RailOptions
	links []*link   // [src*n+dst]
	mods  []*Module // [rank]
}

// New returns a fabric for n ranks with no rails yet; Rail adds them.
func New(n int, clock core.Clock) *Fabric {
	if clock == nil {
		clock = core.SystemClock
	}
	return &Fabric{n: n, clock: clock, names: map[string]int{}}
}

// Size is the number of ranks.
func (f *Fabric) Size() int { return f.n }

// Rail returns the rail called name, creating it with opts on first use
// (later calls ignore opts), and its index.
func (f *Fabric) Rail(name string, opts RailOptions) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i, ok := f.names[name]; ok {
		return i
	}
	opts.defaults()
	r := &rail{name: name, opts: opts, links: make([]*link, f.n*f.n), mods: make([]*Module, f.n)}
	for i := range r.links {
		r.links[i] = newLink(opts.Slots, int64(i))
	}
	idx := len(f.rails)
	for rank := 0; rank < f.n; rank++ {
		r.mods[rank] = newModule(f, r, idx, rank)
	}
	f.rails = append(f.rails, r)
	f.names[name] = idx
	return idx
}

// Module returns rank's module on rail i.
func (f *Fabric) Module(rank, i int) *Module {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rails[i].mods[rank]
}

// Modules returns rank's modules on every rail, in rail order.
func (f *Fabric) Modules(rank int) []core.Module {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]core.Module, len(f.rails))
	for i, r := range f.rails {
		out[i] = r.mods[rank]
	}
	return out
}

func (f *Fabric) link(rail, src, dst int) *link {
	return f.railLinks(rail)[src*f.n+dst]
}

func (f *Fabric) railLinks(rail int) []*link {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rails[rail].links
}

// Delay holds frames and completions from src to dst on rail for at least
// d (both directions when both is true).
func (f *Fabric) Delay(rail, src, dst int, d time.Duration, both bool) {
	f.link(rail, src, dst).delay.Store(int64(d))
	if both {
		f.link(rail, dst, src).delay.Store(int64(d))
	}
}

// Jitter adds a random delay up to d to every frame on rail, so that frames
// on different rails overtake one another (a frame never overtakes another
// on the same link: links are FIFO, as RC connections are).
func (f *Fabric) Jitter(rail int, d time.Duration) {
	for _, l := range f.railLinks(rail) {
		l.jitter.Store(int64(d))
	}
}

// Drop breaks the connection between a and b on rail: sends fail, frames in
// flight are lost, pending completions fail, and both ranks' modules report
// the peer lost.
func (f *Fabric) Drop(rail, a, b int) {
	f.mu.Lock()
	r := f.rails[rail]
	f.mu.Unlock()
	r.links[a*f.n+b].dead.Store(true)
	r.links[b*f.n+a].dead.Store(true)
	r.mods[a].markLost(b)
	r.mods[b].markLost(a)
}

// link is one direction of one rail between two ranks: a single-producer,
// single-consumer ring.
type link struct {
	_      [64]byte
	head   atomic.Uint64 // next slot the receiver reads
	_      [56]byte
	tail   atomic.Uint64 // next slot the sender writes
	_      [56]byte
	delay  atomic.Int64
	jitter atomic.Int64
	dead   atomic.Bool
	slots  []slot
	rng    *rand.Rand // sender-owned
}

type slot struct {
	buf       []byte
	n         int
	at        time.Duration
	solicited bool
}

func newLink(n int, seed int64) *link {
	return &link{slots: make([]slot, n), rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))}
}

// deliverAt is when a frame sent now may be delivered; 0 means at once,
// and then the clock is not read at all.
func (l *link) deliverAt(c core.Clock) time.Duration {
	d, j := l.delay.Load(), l.jitter.Load()
	if d == 0 && j == 0 {
		return 0
	}
	at := c.Now() + time.Duration(d)
	if j > 0 {
		at += time.Duration(l.rng.Int64N(j))
	}
	return at
}
