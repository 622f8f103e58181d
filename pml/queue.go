package pml

import (
	"errors"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml/internal/list"
)

// Work that a module could not take at once (core.ErrNoResources) waits
// here, per subchannel and in order, and is retried from progress.

const maxPre = startFixed + maxSubchannels*keyEntry + 32

// outFrame is a frame waiting for send resources.
type outFrame struct {
	sub   *sub
	h     core.Header
	pre   [maxPre]byte
	npre  int
	data  []byte
	flags core.SendFlags
	req   *Request // an eager send that completes when the frame leaves
	link  list.Link[outFrame]
}

// sendFrame sends a frame on s, or queues it behind earlier frames waiting
// on s. When req is not nil it completes once the frame has left. It
// returns false only if the peer failed.
func (e *engine) sendFrame(p *peer, s *sub, h core.Header, pre, data []byte, flags core.SendFlags, req *Request) bool {
	h.Src = int32(e.rank)
	s.mod.armed = true
	if s.out.Empty() {
		err := s.ep.Send(h, pre, data, flags)
		if err == nil {
			if req != nil {
				e.complete(req, nil)
			}
			return true
		}
		if !errors.Is(err, core.ErrNoResources) {
			e.failPeer(p, err)
			return false
		}
		e.m.retries.Inc()
	}
	f := e.free.frames.Get()
	f.sub, f.h, f.data, f.flags, f.req = s, h, data, flags, req
	f.npre = copy(f.pre[:], pre)
	if req != nil {
		req.refs++
	}
	s.out.PushBack(&f.link, f)
	e.pendingWork++
	return true
}

// frameDone recycles a frame taken off its queue: it has left (sent), and
// the eager send waiting on it completes, or it never will (a failed
// peer, whose requests failPeer fails).
func (e *engine) frameDone(f *outFrame, sent bool) {
	e.pendingWork--
	if r := f.req; r != nil {
		r.refs--
		if sent {
			e.complete(r, nil)
		} else {
			e.maybeRecycle(r)
		}
	}
	f.req, f.data = nil, nil
	e.free.frames.Put(f)
}

// stripe is one RDMA operation of a rendezvous. It is its own completion
// callback, so handing it to a module costs no allocation.
type stripe struct {
	op   core.RDMAOp
	rv   *rendezvous
	req  *Request
	peer *peer
	sub  *sub
	get  bool
	link list.Link[stripe] // on a subchannel's readQ or rdmaQ
}

// RDMADone implements core.Completer; it runs inside a module's Progress
// with the engine lock held.
func (st *stripe) RDMADone(_ *core.RDMAOp, err error) {
	if st.get {
		// Queued reads keep pendingWork above zero, so retry issues the
		// next one with this token.
		st.sub.readTokens++
	}
	st.rv.stripeDone(st, err)
}

// issue hands a stripe to its subchannel, honouring the read token bucket:
// reads queue in FIFO order while no token is free, and queued reads go
// before new ones (seed 004 §4.2).
func (rv *rendezvous) issue(st *stripe) {
	s := st.sub
	if st.get && (s.readTokens == 0 || !s.readQ.Empty()) {
		s.readQ.PushBack(&st.link, st)
		rv.e.pendingWork++
		return
	}
	err := rv.startStripe(st)
	if errors.Is(err, core.ErrNoResources) {
		rv.e.m.retries.Inc()
		s.rdmaQ.PushBack(&st.link, st)
		rv.e.pendingWork++
	} else if err != nil {
		rv.stripeDone(st, err)
	}
}

// startStripe is the one place a stripe reaches the device: a get takes a read
// token (the caller has seen one free), which a refused get gives back.
func (rv *rendezvous) startStripe(st *stripe) error {
	s := st.sub
	s.mod.armed = true
	rv.handOff(st)
	if !st.get {
		return s.rdma.Put(&st.op)
	}
	s.readTokens--
	err := s.rdma.Get(&st.op)
	if err != nil {
		s.readTokens++
	}
	return err
}

// reissue starts the stripes queued on q, one of s's queues, in order
// until the device refuses one, which keeps its place at the front, or a
// read finds no token. It returns how many it started or failed.
func (rv *rendezvous) reissue(s *sub, q *list.List[stripe]) int {
	n := 0
	for k := q.Front(); k != nil; k = q.Front() {
		st := k.Value()
		if st.get && s.readTokens == 0 {
			break
		}
		// Off the queue while the module has it: a failPeer that runs
		// inside the call drains the queues and must not see it.
		q.Remove(k)
		rv.e.pendingWork--
		err := rv.startStripe(st)
		if errors.Is(err, core.ErrNoResources) {
			q.PushFront(&st.link, st)
			rv.e.pendingWork++
			break
		}
		if err != nil {
			rv.stripeDone(st, err)
		}
		n++
	}
	return n
}

// retry resends queued frames, reissues queued RDMA and pumps pipelines.
func (e *engine) retry() int {
	n := 0
	for _, p := range e.chans.all() {
		if p.failed() != nil {
			continue
		}
		for _, s := range p.subchannels() {
			for k := s.out.Front(); k != nil; k = s.out.Front() {
				f := k.Value()
				s.mod.armed = true
				err := s.ep.Send(f.h, f.pre[:f.npre], f.data, f.flags|core.SendBacklog)
				if errors.Is(err, core.ErrNoResources) {
					break
				}
				s.out.Remove(k)
				n++
				e.frameDone(f, err == nil)
				if err != nil {
					e.failPeer(p, err)
					break
				}
			}
			if p.failed() != nil {
				break
			}
			n += e.rndv.reissue(s, &s.readQ)
			n += e.rndv.reissue(s, &s.rdmaQ)
		}
	}
	n += e.rndv.pump()
	return n
}

// handOff notes when a subchannel's first stripe of a message reaches the
// device: the start of the completion filter's delivery time.
func (rv *rendezvous) handOff(st *stripe) {
	x, bit := st.req.x, uint8(1)<<st.sub.idx
	if x.started&bit == 0 {
		x.started |= bit
		x.subStart[st.sub.idx] = rv.e.opts.Clock.Now()
	}
}
