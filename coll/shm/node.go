package shm

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// node is the collectives of the ranks of one node through their
// segment: what every rank of the node keeps of it.
type node struct {
	seg   *segment
	n, me int
	// x is the whole communicator's PML: the waits (Start, WaitRound)
	// end when any of its members is lost, on this node or another.
	x    coll.PML
	spin int
	flat int // the largest node whose barrier and small allreduce are flat
	tree tree

	seq uint64 // collectives begun
	// synced: every rank of the node has finished the collectives up to
	// this one (a barrier or an allreduce that ended here proves it).
	synced uint64
	// rd: for each generation of this rank's slots, the collective that
	// last wrote them and the ranks that read them in it (free).
	rd [2]readers

	step  uint64 // chunk steps begun (chunk.go)
	taken uint64 // every rank's take counter is at least this
	gate  uint64 // 1 + the first step of the last chunk collective (0: none)

	o    *op // the op the next collective runs (nil: make one)
	bg   *op // a collective that a context left to the PML
	reqs [1]*pml.Request
	sts  [1]pml.Status
}

// readers are the ranks that read one generation of this rank's slots
// in collective seq.
type readers struct {
	seq  uint64
	rank []int
}

// The codes of the broken word: why a rank gave up, which every rank
// of the node then reports (plus the rank, shifted by 8).
const (
	brokenLost     = 1 // a member is lost, or the network part failed
	brokenMismatch = 2 // ranks called the collective with arguments that do not fit: lengths, or kinds
)

func brokenErr(w uint64) error {
	if w&0xff == brokenMismatch {
		return fmt.Errorf("coll/shm: rank %d of the node found that the ranks' calls differ (length or kind): %w", w>>8-1, coll.ErrMismatch)
	}
	return fmt.Errorf("coll/shm: a collective failed on rank %d of the node: %w", w>>8-1, core.ErrPeerLost)
}

// fail breaks the segment for err, so that every rank of the node fails
// its collective too instead of waiting for this one.
func (m *node) fail(err error) error {
	code := uint64(brokenLost)
	if errors.Is(err, coll.ErrMismatch) {
		code = brokenMismatch
	}
	m.seg.breakWith(code | uint64(m.me+1)<<8)
	return err
}

// free reports whether this rank may write its slots of generation g:
// the ranks that read them last have finished that collective.
func (m *node) free(g int) bool {
	r := &m.rd[g]
	if r.seq <= m.synced {
		return true
	}
	for _, x := range r.rank {
		if atomic.LoadUint64(m.seg.counter(x, cDone)) < r.seq {
			return false
		}
	}
	return true
}

// begin readies the op of the next collective.
func (m *node) begin(k kind) *op {
	o := m.o
	if o == nil {
		o = &op{m: m}
		m.o = o
	}
	m.seq++
	*o = op{m: m, kind: k, seq: m.seq, g: int(m.seq & 1)}
	return o
}

// run runs o to its end: it polls o's flags up to spin times, then
// hands o to the PML and waits for it there — the PML's back-off
// (yield, then sleep), its progress (which notices a lost member), its
// stall bound and the context's end.
func (m *node) run(ctx context.Context, o *op) error {
	for i := 0; ; i++ {
		if done, err := o.Advance(); done {
			return m.end(err)
		}
		if i >= m.spin {
			break
		}
	}
	r, err := m.x.Start(o)
	if err != nil {
		return m.end(fmt.Errorf("coll/shm: %w", err))
	}
	m.reqs[0] = r
	err = m.x.WaitRound(ctx, m.reqs[:], m.sts[:], o)
	if m.reqs[0] == nil {
		return m.end(err)
	}
	return m.left(ctx, o, r, err)
}

// end finishes a collective whose op is done.
func (m *node) end(err error) error {
	if err != nil {
		return m.fail(err)
	}
	return nil
}

// left deals with a wait that returned with o still running in the PML:
// a context that ended leaves it there to finish, as the request of a
// *coll.PendingError (the next collective waits for it first); a lost
// member ends it.
func (m *node) left(ctx context.Context, o *op, r *pml.Request, err error) error {
	m.o = nil // the PML holds o until it is done
	m.reqs[0] = nil
	if ctx.Err() != nil && err == ctx.Err() {
		m.bg = o
		return &coll.PendingError{Request: r, Err: err}
	}
	o.halt(err)
	_ = m.x.Free(r)
	return m.fail(fmt.Errorf("coll/shm: %w", err))
}

// drain waits for the collective a context left running, before the
// next one begins: the two would share the slots and the sequence. Its
// request is the program's, so it waits for the op itself (overOp). It
// waits whatever the next one's context — the other ranks finish the
// earlier collective (or fail it) without this rank's help.
func (m *node) drain() error {
	o := m.bg
	m.bg = nil
	if o.over.Load() {
		return nil
	}
	w := overOp{o}
	r, err := m.x.Start(w)
	if err == nil {
		m.reqs[0] = r
		err = m.x.WaitRound(context.Background(), m.reqs[:], m.sts[:], w)
		if m.reqs[0] != nil {
			m.reqs[0] = nil
			o.halt(err)
			_ = m.x.Free(r)
		}
	}
	if err != nil {
		return m.fail(fmt.Errorf("coll/shm: %w", err))
	}
	return nil
}

// overOp is done when the collective o is: drain's wait.
type overOp struct{ o *op }

func (w overOp) Advance() (bool, error) { return w.o.over.Load(), nil }

func (w overOp) String() string { return w.o.String() + ", before the next one" }

// kind is what an op runs.
type kind uint8

const (
	kBarrier kind = iota
	kAllreduce
	kReduce
	kBcast
	kAllreduceChunks
	kReduceChunks
	kBcastChunks
	kAllgatherChunks
)

var kindNames = [...]string{
	kBarrier: "coll/shm barrier", kAllreduce: "coll/shm allreduce", kReduce: "coll/shm reduce", kBcast: "coll/shm bcast",
	kAllreduceChunks: "coll/shm allreduce (chunks)", kReduceChunks: "coll/shm reduce (chunks)",
	kBcastChunks: "coll/shm bcast (chunks)", kAllgatherChunks: "coll/shm allgather (chunks)",
}

// op is one collective in progress on this rank: a resumable program
// that Advance runs as far as the flags allow. It is a pml.Op, so that
// the PML's waits can advance it once the spin is over.
type op struct {
	m          *node
	kind       kind
	seq        uint64
	g          int // the generation of the slots
	root       int // local
	send, recv []byte
	fn         coll.Op
	pc, i      int
	// chunk steps (chunk.go): the first step (in a slot: the steps
	// begun before it, straddle.go), how many, the one at hand and its
	// phase; gate: the steps every rank must have taken before the first
	// fill (roots.go)
	t0, gate uint64
	steps    int
	j, ph    int
	said     bool // this rank announced its root (roots.go)
	polls    int  // the polls of a wait in a broadcast or a reduce (roots.go)
	halted   atomic.Pointer[error]
	over     atomic.Bool // Advance has reported done
}

// String names the collective for the PML's state reports.
func (o *op) String() string { return kindNames[o.kind] }

// halt makes the next Advance end o with err (from any goroutine: the
// PML may be advancing o).
func (o *op) halt(err error) { o.halted.Store(&err) }

// Advance runs o as far as it can without waiting (pml.Op).
func (o *op) Advance() (bool, error) {
	if p := o.halted.Load(); p != nil {
		o.over.Store(true)
		return true, *p
	}
	m := o.m
	var done bool
	var err error
	for again := false; ; again = true {
		switch o.kind {
		case kBarrier, kAllreduce:
			if m.n <= m.flat {
				done, err = o.flat()
			} else {
				done, err = o.allreduce()
			}
		case kReduce:
			done, err = o.reduce()
		case kBcast:
			done, err = o.bcast()
		case kAllreduceChunks, kReduceChunks:
			done, err = o.reduceChunks()
		case kBcastChunks:
			done, err = o.bcastChunks()
		case kAllgatherChunks:
			done, err = o.allgatherChunks()
		}
		if done {
			break
		}
		// A rank that gave up breaks the segment: the flags this rank
		// waits for may never move. They may also have moved before it
		// broke, in a collective over on every other rank (the break
		// came in the next one): look once more before failing it.
		w := m.seg.broken()
		if w == 0 {
			return false, nil
		}
		if again {
			done, err = true, brokenErr(w)
			break
		}
	}
	o.over.Store(true)
	if err != nil {
		m.fail(err) // the others may wait for this rank
	} else {
		atomic.StoreUint64(m.seg.counter(m.me, cDone), o.seq)
		switch o.kind {
		case kBarrier, kAllreduce, kAllreduceChunks, kAllgatherChunks:
			// Every rank has begun this collective, so finished the last.
			m.synced = o.seq - 1
		}
	}
	return done, err
}

// call runs one collective of the node: kind k, the small form when its
// bytes fit a slot, the chunked one otherwise (allgather always).
func (m *node) call(ctx context.Context, k kind, send, recv []byte, fn coll.Op, root int) error {
	n := max(len(send), len(recv))
	per := m.seg.lay.chunk
	switch {
	case k == kAllgatherChunks:
		n = len(send)
	case n <= m.seg.lay.small:
	case k == kBcast:
		k = kBcastChunks
	default:
		k += kAllreduceChunks - kAllreduce
		per = per / fn.Size * fn.Size
	}
	// A broken segment fails every collective that begins after it broke
	// (one in flight whose flags were set before it broke finishes).
	if m.bg != nil {
		if err := m.drain(); err != nil {
			return err
		}
	}
	if w := m.seg.broken(); w != 0 {
		return brokenErr(w)
	}
	o := m.begin(k)
	o.send, o.recv, o.fn, o.root, o.t0 = send, recv, fn, root, m.step
	if k >= kAllreduceChunks {
		o.steps = (n + per - 1) / per
		o.gate, m.gate = m.gate, m.step+1
		m.step += uint64(o.steps)
	}
	return m.run(ctx, o)
}
