package coll

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// Comm is the collective layer of one communicator (Open MPI's coll
// module of a communicator): the PML communicator it runs over, the
// decision that picks each call's algorithm, and the schedules of
// finished collectives kept for the next ones.
//
// Every rank must call the collectives of a Comm in the same order, as
// MPI requires; from several goroutines that means the program orders
// them (a Comm per goroutine, from Dup, is the simple way). The
// non-blocking ones return a *pml.Request that any wait or test of the
// job advances and completes.
type Comm struct {
	p PML // the communicator the program sees
	x PML // the same ranks on its collective context
	t *Tuning
	// derive makes the PML communicator of Split and Dup and its
	// collective layer (see New).
	derive func(ctx uint32, ranks []int) (*Comm, error)

	mu   sync.Mutex
	seq  uint32      // collectives started: the tag of the next one
	free []*schedule // finished schedules, for reuse
	// warm keeps, per collective, the last finished schedule of a small
	// one with its steps (see again).
	warm [numKinds]*schedule
	// calls counts the collectives by algorithm (coll.<kind>.<alg>).
	calls [numKinds][numAlgs]*core.Counter
	// node is the node component's module (node.go): the blocking
	// collectives run in order, so only they touch it.
	node nodeState
	// opKey and opHash cache the last operation's signature (agree.go);
	// failed holds the last collectives that failed here with
	// ErrMismatch (their sequence numbers, marked), nfailed counts them.
	opKey   uintptr
	opHash  uint64
	failed  [8]int
	nfailed int
}

// New returns the collective layer of p, choosing algorithms by t (nil:
// the built-in decision alone). p is a *pml.Comm in every program; the
// type parameter only lets Split and Dup derive communicators of p's own
// type (see Communicator).
func New[P Communicator[P]](p P, t *Tuning) *Comm {
	if t == nil {
		t = &Tuning{}
	}
	c := &Comm{p: p, x: p.Collectives(), t: t}
	c.derive = func(ctx uint32, ranks []int) (*Comm, error) {
		q, err := p.Derive(ctx, ranks)
		if err != nil {
			return nil, err
		}
		return New(q, t), nil
	}
	for k, d := range kinds {
		for _, a := range d.algs {
			c.calls[k][a] = p.Metrics().Counter("coll." + d.name + "." + a.String())
		}
	}
	return c
}

// PML returns the point-to-point communicator c runs over (the one New
// was given, or one it derived for Split and Dup).
func (c *Comm) PML() PML { return c.p }

// Tuning returns the algorithm choices c was made with.
func (c *Comm) Tuning() *Tuning { return c.t }

// Rank is this rank's place in the communicator.
func (c *Comm) Rank() int { return c.p.Rank() }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.p.Size() }

// tagBase keeps collective tags clear of those of the PML's own barrier,
// which uses the small ones of the collective context.
const tagBase = 1 << 30

// begin takes a schedule for a new collective, its tag the next in the
// sequence every rank follows alike, signed with cl (agree.go).
func (c *Comm) begin(k Kind, alg Alg, cl call) *schedule {
	c.mu.Lock()
	var s *schedule
	if n := len(c.free); n > 0 {
		s = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		s = &schedule{}
	}
	sig := c.sign(k, cl) << seqBits
	tag := c.nextTag() | sig
	c.mu.Unlock()
	c.count(k, alg)
	s.reset(c, tag, k, alg)
	s.sig = sig
	return s
}

// nextTag is the tag of the next collective, unsigned (lock held).
func (c *Comm) nextTag() int {
	tag := tagBase | int(c.seq&seqMask)
	c.seq++
	return tag
}

func (c *Comm) count(k Kind, alg Alg) {
	if ctr := c.calls[k][alg]; ctr != nil {
		ctr.Inc()
	}
}

// again returns, ready to run under the next tag, the schedule of the
// last collective of kind k if it ran algorithm alg between the same
// buffers a and b (nil for none) — its steps are then those this call
// would build — or nil. A small collective called over and over (the
// residual's allreduce of an iterative solver, a barrier) so builds its
// steps once: building them was as much work as posting its messages.
// The Comm holds on to the buffers of one such schedule per collective
// until the next call.
func (c *Comm) again(k Kind, alg Alg, a, b []byte) *schedule {
	c.mu.Lock()
	s := c.warm[k]
	if s == nil || s.alg != alg || !sameRef(s.wa, a) || !sameRef(s.wb, b) {
		c.mu.Unlock()
		return nil
	}
	c.warm[k] = nil
	// The same buffers, the same length: the signature is the last
	// call's but for its operation, which the caller checks (resign).
	s.tag = c.nextTag() | s.sig
	c.mu.Unlock()
	c.count(k, alg)
	// idle and noticed are as reset left them: a finished round clears
	// idle, and a schedule noticed failed is never kept.
	s.pc = 0
	return s
}

// keep marks s, just built, as one that again may give out once more:
// its steps depend on nothing but its algorithm, the communicator and
// the buffers a and b.
func (s *schedule) keep(a, b []byte) { s.warm, s.wa, s.wb = true, a, b }

// put keeps a finished schedule for a later collective: a warm one whole
// for again, any other without its steps, whose user buffers are
// dropped.
func (c *Comm) put(s *schedule) {
	if s.warm {
		c.mu.Lock()
		s, c.warm[s.kind] = c.warm[s.kind], s
		c.mu.Unlock()
		if s == nil {
			return
		}
	}
	clear(s.steps)
	s.steps = s.steps[:0]
	s.warm, s.wa, s.wb = false, nil, nil
	c.mu.Lock()
	if len(c.free) < 4 {
		c.free = append(c.free, s)
	}
	c.mu.Unlock()
}

// block runs a schedule to its end and returns its error, or a
// *PendingError if ctx ends first: the collective then goes on in the
// background as the error's request, as its non-blocking form would
// (every rank must still take part).
//
// It waits each round itself (pml.Comm.WaitRound) instead of handing the
// schedule to the PML as an operation to wait on: a round's receives
// then take the PML's fused path — a frame copied from the peer's fast
// box straight into the receive, one look at one peer per round of the
// wait — where an operation is advanced beside a poll of every module,
// and while one is started the fused paths are off for the whole job.
// A round that did not finish at the first look costs one wait, not a
// request, a test of every message and an operation's queue.
func (c *Comm) block(ctx context.Context, s *schedule) error {
	x := c.x
	for {
		if len(s.reqs) > 0 {
			err := x.WaitRound(ctx, s.reqs, s.sts[:len(s.reqs)], s)
			if err != nil && ctx.Err() != nil && err == ctx.Err() {
				return c.pending(s, err)
			}
			if err == nil {
				err = s.checkCounts()
			}
			if err != nil {
				return s.fail(err)
			}
			s.reqs, s.want = s.reqs[:0], s.want[:0]
		}
		if s.pc == len(s.steps) {
			c.put(s)
			return nil
		}
		if err := s.run(); err != nil {
			return s.fail(err)
		}
	}
}

// pending hands s, whose blocking call's context ended with err, to the
// PML as a request, returned in a *PendingError: what completed of the
// round is nil in s.reqs, its status in s.sts, and the rest goes on in
// the background. A PML that takes no operation any more (closed,
// aborted) ends the collective here.
func (c *Comm) pending(s *schedule, err error) error {
	r, serr := c.x.Start(s)
	if serr != nil {
		return s.fail(errors.Join(err, serr))
	}
	return &PendingError{Request: r, Err: err}
}

// PendingError is the error a blocking collective returns when its
// context ends before the collective has completed on this rank. A
// collective is one operation of every rank — the others may be waiting
// for this rank's messages, or already past them — so it does not stop
// half-way: it goes on in the background as Request, which every wait
// and test of the job advances, and which completes when the collective
// completes on this rank, or fails here (with the collective's error).
// Until Request completes the collective's buffers are in use: the PML may
// still read the send buffer and write the receive buffer. Wait for it
// (any Wait or Test of the PML, WaitContext with a context of its own)
// before touching them, or Free it to give them up.
//
// Err is the context's error, which Unwrap returns: errors.Is(err,
// context.DeadlineExceeded) holds for a PendingError of a deadline.
type PendingError struct {
	Request *pml.Request
	Err     error
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("coll: %v; the collective goes on until its request completes", e.Err)
}

// Unwrap returns the context's error.
func (e *PendingError) Unwrap() error { return e.Err }

// start advances s once and, unless that finished it, hands it to the PML
// as a request. A nil request with a nil error means s is done.
func (c *Comm) start(s *schedule) (*pml.Request, error) {
	done, err := s.advance(true)
	if done {
		return nil, err
	}
	return c.x.Start(s)
}

// nonblocking returns a request for s, one already completed when s
// finished at once.
func (c *Comm) nonblocking(s *schedule) (*pml.Request, error) {
	done, err := s.advance(true)
	if !done {
		return c.x.Start(s)
	}
	if err == nil {
		return c.x.Start(finishedOK)
	}
	return c.x.Start(finished{err})
}

// finishedOK is the finished operation without an error, made once: an
// interface holding a struct with a field allocates.
var finishedOK pml.Op = finished{}

// finished is an operation that is over before its request exists.
type finished struct{ err error }

func (f finished) Advance() (bool, error) { return true, f.err }

// checkRoot validates a root argument.
func (c *Comm) checkRoot(what string, root int) error {
	if root < 0 || root >= c.Size() {
		return fmt.Errorf("coll: %s: root %d outside a communicator of %d: %w", what, root, c.Size(), pml.ErrInvalid)
	}
	return nil
}

func errf(what, format string, args ...any) error {
	return fmt.Errorf("coll: %s: %s: %w", what, fmt.Sprintf(format, args...), pml.ErrInvalid)
}
