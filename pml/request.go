package pml

import (
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml/internal/list"
)

// AnySource and AnyTag are the receive wildcards.
const (
	AnySource = -1
	AnyTag    = -1
)

// Status describes a completed request.
type Status struct {
	// Source and Tag of the matched message (receives).
	Source, Tag int
	// Count is the number of bytes received (or sent).
	Count int
	// Err is nil on success; it wraps core.ErrTruncated, core.ErrPeerLost,
	// core.ErrCanceled and the like.
	Err error
}

type reqKind uint8

const (
	reqSend reqKind = iota + 1
	reqRecv
	reqOp // an Op of a layer above (Start)
)

// Request is a non-blocking send, receive or operation of a layer above
// (a collective, Start). It is released by Wait, by a Test that reports
// completion, by the all/any/some forms and by Free; a released request
// must not be used again (it is recycled, as MPI sets a handle to
// MPI_REQUEST_NULL). Any goroutine may wait on or test a request, but only
// one at a time. Eager Isends that completed at once may return the same
// request, shared (as Open MPI's ob1 returns ompi_request_empty for a
// send that went inline): each handle is still waited for or freed once.
type Request struct {
	e    *engine
	kind reqKind
	idx  uint32 // slot in the engine's request table
	gen  uint32 // bumped on every reuse; remote references carry it

	done     bool
	released bool
	refs     int // stripes and queued frames still pointing at this request

	ctx  uint32
	g    *group // the communicator's ranks, to report a local source
	peer int    // job rank of the destination, or of the source asked for (maybe AnySource)
	tag  int
	buf  []byte
	src  int // a matched receive's actual source

	status Status
	op     Op // reqOp: the operation, until it finishes

	// shared marks a communicator's shared done send (sharedSend),
	// which holders handles refer to; it is released when none does.
	shared  bool
	holders int

	// Protocol state.
	exchange bool // a send the peer answers with one of its own (IsendExchange)
	proto    Protocol
	total    int    // message length
	accept   int    // bytes the receiver takes: min(total, receive buffer)
	got      int    // receive: bytes placed; send: bytes handed over
	remote   uint64 // the peer's request id
	x        *rdmaState

	// link puts a receive on its context's posted list until it matches,
	// and a pipelined send on the rendezvous pump list while it pumps; a
	// request is one or the other, so one link serves both.
	link list.Link[Request]
}

// posted reports whether r is a receive still waiting on its context's
// posted list.
func (r *Request) posted() bool { return r.kind == reqRecv && r.link.Linked() }

// rdmaState is what a rendezvous needs beyond an eager message:
// registrations, stripes and the completion filter's clocks. It lives
// apart from Request so that an eager message does not clear it.
type rdmaState struct {
	subs    uint8 // bitmap of subchannels carrying RDMA data
	stripes int   // stripes not yet completed
	failed  error // first error seen while stripes drain
	regs    [maxSubchannels]core.Region
	regMods [maxSubchannels]core.Registrar
	perSub  [maxSubchannels]int // RDMA bytes completed per subchannel
	msgID   uint64
	// The completion filter's clock per subchannel: when the first stripe
	// was handed to the device and when the last one completed.
	started  uint8
	subStart [maxSubchannels]time.Duration
	subEnd   [maxSubchannels]time.Duration
	// A choice of mechanism (choose.go). The sender: it offered the
	// receiver RDMA or the pipeline. The receiver: the peer's choice that
	// chose, and when, for telling it how long the data took.
	offered bool
	chooser chooser
	chosen  time.Duration
}

// state returns r's rendezvous state, taking it from the pool on first
// use.
func (rv *rendezvous) state(r *Request) *rdmaState {
	if r.x == nil {
		r.x = rv.states.Get()
	}
	return r.x
}

// dropState deregisters r's memory and recycles its rendezvous state.
func (rv *rendezvous) dropState(r *Request) {
	x := r.x
	for i := range x.regs {
		if x.regs[i] != nil {
			_ = x.regMods[i].DeregisterMem(x.regs[i])
		}
	}
	*x = rdmaState{}
	rv.states.Put(x)
	r.x = nil
}

// id is how a peer names this request in control frames.
func (r *Request) id() uint64 { return uint64(r.gen)<<32 | uint64(r.idx) }

// newRequest takes a request from the free list (lock held) and sets it
// up for an operation on context ctx of group g with peer, tag and buf.
//
// It sets every field one by one instead of assigning a new Request: the
// compiler builds that literal on the stack and copies all of it, some
// 75 instructions of an eager message's 1,000. What recycle leaves it
// does not set again (takeRequest); TestNewRequestResetsEveryField fails
// when a field is added here without a reset.
func (e *engine) newRequest(kind reqKind, ctx uint32, g *group, peer, tag int, buf []byte) *Request {
	r := e.takeRequest()
	r.kind, r.gen = kind, r.gen+1
	r.done, r.released = false, false
	r.ctx, r.g, r.peer, r.tag, r.buf, r.src = ctx, g, peer, tag, buf, 0
	r.status = Status{}
	r.op = nil
	r.proto, r.total, r.accept, r.got, r.remote, r.exchange = 0, 0, 0, 0, 0, false
	return r
}

// takeRequest returns a request from the free list, or a new one with a
// slot in the table (lock held). A recycled request is as recycle left
// it: this engine's (e), no stripe or queued frame pointing at it (refs
// 0), no rendezvous state (x nil), off every list and without a buffer;
// and never a communicator's shared done send, which its reference keeps
// from being recycled (shared false, holders 0).
func (e *engine) takeRequest() *Request {
	if r := e.free.reqs.Take(); r != nil {
		return r
	}
	return e.addRequest()
}

// addRequest makes a request with the next slot of the table.
func (e *engine) addRequest() *Request {
	r := &Request{e: e, idx: uint32(len(e.reqs))}
	e.reqs = append(e.reqs, r)
	return r
}

// sentRequest returns the request of an eager send to job rank dest that
// has left already (lock held): done at once, without the buffer, which
// the send no longer needs, and with nothing for complete to undo. It is
// a request like any other to Wait, Test, Free and the rest. It is
// newRequest with its status set once, not cleared and set again.
func (e *engine) sentRequest(g *group, ctx uint32, dest, tag, n int) *Request {
	r := e.takeRequest()
	r.kind, r.gen = reqSend, r.gen+1
	r.done, r.released = true, false
	r.ctx, r.g, r.peer, r.tag, r.src = ctx, g, dest, tag, 0
	r.status = Status{Source: g.toLocal(e.rank), Tag: tag, Count: n}
	r.op = nil
	r.proto, r.total, r.accept, r.got, r.remote, r.exchange = 0, 0, 0, 0, 0, false
	return r
}

// An eager send that has left already (Isend's fused path) can only be
// waited for, tested or freed, and every such request reports the same
// thing. So, as Open MPI's ob1 returns ompi_request_empty for a send that
// went inline, a communicator hands out one shared done send (Comm.sent,
// sharedSend) as long as its status fits: its tag and count, which it
// takes on whenever no handle refers to it (holders 0). A window of 64
// 8-byte Isends then takes, sets, releases and recycles no request.
//
// What a program sees is the same but for two things only a program
// breaking Request's rules could notice: the Isends return the same
// pointer, and using a released handle again while another still refers
// to the shared request is not reported as ErrInvalid (it is once none
// does, as for any request). Another tag or count while handles are out
// takes a request of its own (ownSend).
//
// sharedSend makes c's shared done send (Comm.sent). It is in no table
// (gen 0: no peer refers to it, no state report lists it), and its one
// ref, c's, keeps it from ever being recycled.
func (e *engine) sharedSend(c *Comm) *Request {
	return &Request{e: e, kind: reqSend, done: true, released: true, shared: true, refs: 1,
		ctx: c.ctx, g: c.g, peer: -1, status: Status{Source: c.rank}}
}

// lookup resolves a peer's reference to one of our requests. A stale or
// forged id yields nil.
func (e *engine) lookup(id uint64, kind reqKind) *Request {
	idx, gen := uint32(id), uint32(id>>32)
	if uint64(idx) >= uint64(len(e.reqs)) {
		return nil
	}
	r := e.reqs[idx]
	if r.gen != gen || r.kind != kind || r.done {
		return nil
	}
	return r
}

// complete marks r done with err (lock held). Registrations are dropped
// once no stripe uses them.
func (e *engine) complete(r *Request, err error) {
	if r.done {
		return
	}
	r.done = true
	if r.proto != 0 && r.kind == reqSend {
		e.chans.lookup(r.peer).rndvEnded()
	}
	if r.status.Err == nil {
		r.status.Err = err
	}
	if r.kind == reqRecv {
		e.pendingRecvs--
	}
	e.maybeRecycle(r)
}

// release hands r back after the user saw its completion (lock held).
func (e *engine) release(r *Request) {
	r.released = true
	if r.done && r.refs == 0 && r.x == nil {
		e.recycle(r) // an eager message: recycleNow's last step alone
		return
	}
	if r.shared {
		r.holders--
		r.released = r.holders == 0
		return
	}
	e.maybeRecycle(r)
}

// maybeRecycle frees what r holds once nothing uses it: its RDMA state
// once it is done and no stripe refers to it, and r itself once the user
// has released it too. The test is inlined into its callers (complete and
// release on every message), the work is not.
func (e *engine) maybeRecycle(r *Request) {
	if r.refs == 0 && r.done && (r.x != nil || r.released) {
		e.recycleNow(r)
	}
}

// recycleNow is maybeRecycle's work.
func (e *engine) recycleNow(r *Request) {
	if r.x != nil {
		e.rndv.dropState(r)
	}
	if !r.released {
		return
	}
	e.recycle(r)
}

// recycle puts r, done, released and unreferenced, on the free list.
func (e *engine) recycle(r *Request) {
	r.buf = nil
	r.gen++ // invalidate remote references at once
	e.free.reqs.Put(r)
}

// ownSend is the request of an eager send on c to job rank dest that
// has left already and that c's shared done send cannot stand for (lock
// held); a call apart, so that Isend's common case keeps its registers.
func (c *Comm) ownSend(dest, tag, n int) *Request {
	return c.e.sentRequest(c.g, c.ctx, dest, tag, n)
}
