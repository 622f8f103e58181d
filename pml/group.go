package pml

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// A communicator over some of the job's ranks (MPI_Comm_split) numbers
// them 0..n-1 in its own order; the engine, its peers and its frames speak
// job ranks. The translation happens where a rank crosses the API: a
// call's peer on the way in, a status's source on the way out. Matching is
// unaffected: only members send on a communicator's context, so a frame's
// job rank is enough to match it.

// group is the ranks of a communicator that is not the whole job: local
// rank i is job rank world[i], and local[w] is job rank w's local rank, or
// -1 for a job rank outside the group. The nil group is the whole job.
type group struct {
	world []int
	local []int32
}

// toWorld translates a local rank (or AnySource) to a job rank.
func (g *group) toWorld(r int) int {
	if g == nil || r < 0 {
		return r
	}
	return g.world[r]
}

// toLocal translates a job rank to a local rank.
func (g *group) toLocal(w int) int {
	if g == nil || w < 0 {
		return w
	}
	return int(g.local[w])
}

// NextContext returns the lowest context id this rank has not handed out.
// A layer above that creates communicators over some ranks (Split) agrees
// on an id first — the maximum of every member's NextContext, as Open
// MPI's cid allocation does — and passes it to Derive: the ranks that take
// part in a Split need not have taken part in the same earlier ones, so
// their counters may differ.
func (c *Comm) NextContext() uint32 {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.e.match.nextContext()
}

// Derive returns a communicator over ranks (ranks of c, in the new
// communicator's order; this rank must be one of them) on context ctx and
// ctx+1 for its collectives. Every member must call it with the same ctx
// and ranks; ctx must be one this rank has not handed out (at least
// NextContext), and this rank's later ids come after it.
func (c *Comm) Derive(ctx uint32, ranks []int) (*Comm, error) {
	e := c.e
	g := &group{world: make([]int, len(ranks)), local: make([]int32, e.size)}
	for i := range g.local {
		g.local[i] = -1
	}
	me := -1
	for i, r := range ranks {
		if r < 0 || r >= c.size {
			return nil, fmt.Errorf("pml: derive: rank %d outside a communicator of %d: %w", r, c.size, ErrInvalid)
		}
		w := c.g.toWorld(r)
		if g.local[w] >= 0 {
			return nil, fmt.Errorf("pml: derive: rank %d named twice: %w", r, ErrInvalid)
		}
		g.world[i], g.local[w] = w, int32(i)
		if w == e.rank {
			me = i
		}
	}
	if me < 0 {
		return nil, fmt.Errorf("pml: derive: this rank (%d) is not among the new communicator's: %w", c.rank, ErrInvalid)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("pml: derive: %w", core.ErrClosed)
	}
	if err := e.match.derive(ctx); err != nil {
		return nil, err
	}
	if len(ranks) == e.size && isIdentity(g.world) {
		g = nil // the whole job, in job order: no translation
	}
	return e.newComm(ctx, g, me, len(ranks)), nil
}

func isIdentity(w []int) bool {
	for i, r := range w {
		if r != i {
			return false
		}
	}
	return true
}

// newComm builds a communicator on ctx (lock held) with its view on the
// collective context ctx+1.
func (e *engine) newComm(ctx uint32, g *group, rank, size int) *Comm {
	c := &Comm{e: e, ctx: ctx, cx: e.match.context(ctx), g: g, rank: rank, size: size}
	c.coll = &Comm{e: e, ctx: ctx + 1, cx: e.match.context(ctx + 1), g: g, rank: rank, size: size}
	c.coll.coll = c.coll
	c.sent, c.coll.sent = e.sharedSend(c), e.sharedSend(c.coll)
	return c
}

// Collectives returns c on its collective context: the same ranks, the
// context id after c's, on which only a collective layer sends, so that a
// collective's messages never match c's point-to-point receives, nor the
// other way round (Open MPI's coll components use reserved tags for the
// same end). Requests started on it are waited and tested as any.
func (c *Comm) Collectives() *Comm { return c.coll }

// Lost returns an error wrapping core.ErrPeerLost when a member of c has
// been lost, and nil otherwise. A collective, which may be waiting on a
// member that is alive but will never send because it lost another, polls
// it so that it fails instead of hanging.
func (c *Comm) Lost() error {
	e := c.e
	if !e.chans.anyLost() {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for r := range c.size {
		if err := e.lostErr(c.g.toWorld(r)); err != nil {
			return err
		}
	}
	return nil
}
