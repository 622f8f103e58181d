package pml

import (
	"errors"

	"github.com/gobtl/gobtl/core"
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
	next  *outFrame
}

type frameQueue struct{ head, tail *outFrame }

func (q *frameQueue) push(f *outFrame) {
	f.next = nil
	if q.tail != nil {
		q.tail.next = f
	} else {
		q.head = f
	}
	q.tail = f
}

func (q *frameQueue) pop() *outFrame {
	f := q.head
	if f != nil {
		q.head = f.next
		if q.head == nil {
			q.tail = nil
		}
		f.next = nil
	}
	return f
}

// sendFrame sends a frame on s, or queues it behind earlier frames waiting
// on s. When req is not nil it completes once the frame has left. It
// returns false only if the peer failed.
func (e *engine) sendFrame(p *peer, s *sub, h core.Header, pre, data []byte, flags core.SendFlags, req *Request) bool {
	h.Src = int32(e.rank)
	if s.out.head == nil {
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
	f := e.newFrame()
	f.sub, f.h, f.data, f.flags, f.req = s, h, data, flags, req
	f.npre = copy(f.pre[:], pre)
	if req != nil {
		req.refs++
	}
	s.out.push(f)
	e.pendingWork++
	return true
}

func (e *engine) newFrame() *outFrame {
	if n := len(e.freeFrames); n > 0 {
		f := e.freeFrames[n-1]
		e.freeFrames = e.freeFrames[:n-1]
		return f
	}
	return new(outFrame)
}

// dropFrame discards a queued frame of a failed peer.
func (e *engine) dropFrame(f *outFrame) {
	e.pendingWork--
	if r := f.req; r != nil {
		r.refs--
		e.maybeRecycle(r)
	}
	f.req, f.data = nil, nil
	e.freeFrames = append(e.freeFrames, f)
}

// stripe is one RDMA operation of a rendezvous. It is its own completion
// callback, so handing it to a module costs no allocation.
type stripe struct {
	op   core.RDMAOp
	e    *engine
	req  *Request
	peer *peer
	sub  *sub
	get  bool
	next *stripe
}

// RDMADone implements core.Completer; it runs inside a module's Progress
// with the engine lock held.
func (st *stripe) RDMADone(_ *core.RDMAOp, err error) {
	if st.get {
		// Queued reads keep pendingWork above zero, so retry issues the
		// next one with this token.
		st.sub.readTokens++
	}
	st.e.stripeDone(st, err)
}

type stripeQueue struct{ head, tail *stripe }

func (q *stripeQueue) push(s *stripe) {
	s.next = nil
	if q.tail != nil {
		q.tail.next = s
	} else {
		q.head = s
	}
	q.tail = s
}

func (q *stripeQueue) pop() *stripe {
	s := q.head
	if s != nil {
		q.head = s.next
		if q.head == nil {
			q.tail = nil
		}
		s.next = nil
	}
	return s
}

func (e *engine) newStripe() *stripe {
	if n := len(e.freeStrips); n > 0 {
		s := e.freeStrips[n-1]
		e.freeStrips = e.freeStrips[:n-1]
		return s
	}
	return &stripe{e: e}
}

// issue hands a stripe to its subchannel, honouring the read token bucket:
// reads queue in FIFO order while no token is free, and queued reads go
// before new ones (seed 004 §4.2).
func (e *engine) issue(st *stripe) {
	s := st.sub
	if st.get {
		if s.readTokens == 0 || s.readQ.head != nil {
			s.readQ.push(st)
			e.pendingWork++
			return
		}
		s.readTokens--
	}
	e.handOff(st)
	var err error
	if st.get {
		err = s.rdma.Get(&st.op)
	} else {
		err = s.rdma.Put(&st.op)
	}
	if err == nil {
		return
	}
	if st.get {
		s.readTokens++
	}
	if errors.Is(err, core.ErrNoResources) {
		e.m.retries.Inc()
		s.rdmaQ.push(st)
		e.pendingWork++
		return
	}
	e.stripeDone(st, err)
}

// retry resends queued frames, reissues queued RDMA and pumps pipelines.
func (e *engine) retry() int {
	n := 0
	for _, p := range e.peers {
		if p.lost != nil {
			continue
		}
		for _, s := range p.subs {
			for f := s.out.head; f != nil; f = s.out.head {
				err := s.ep.Send(f.h, f.pre[:f.npre], f.data, f.flags)
				if errors.Is(err, core.ErrNoResources) {
					break
				}
				s.out.pop()
				n++
				if err != nil {
					e.dropFrame(f)
					e.failPeer(p, err)
					break
				}
				e.pendingWork--
				if r := f.req; r != nil {
					r.refs--
					e.complete(r, nil)
				}
				f.req, f.data = nil, nil
				e.freeFrames = append(e.freeFrames, f)
			}
			if p.lost != nil {
				break
			}
			for s.readQ.head != nil && s.readTokens > 0 {
				st := s.readQ.pop()
				e.pendingWork--
				s.readTokens--
				e.handOff(st)
				if err := s.rdma.Get(&st.op); err != nil {
					s.readTokens++
					if errors.Is(err, core.ErrNoResources) {
						s.readQ.pushFront(st)
						e.pendingWork++
						break
					}
					e.stripeDone(st, err)
				}
				n++
			}
			for st := s.rdmaQ.head; st != nil; st = s.rdmaQ.head {
				if st.get && s.readTokens == 0 {
					break
				}
				s.rdmaQ.pop()
				e.pendingWork--
				if st.get {
					s.readTokens--
				}
				e.handOff(st)
				var err error
				if st.get {
					err = s.rdma.Get(&st.op)
				} else {
					err = s.rdma.Put(&st.op)
				}
				if err != nil {
					if st.get {
						s.readTokens++
					}
					if errors.Is(err, core.ErrNoResources) {
						s.rdmaQ.pushFront(st)
						e.pendingWork++
						break
					}
					e.stripeDone(st, err)
				}
				n++
			}
		}
	}
	n += e.pump()
	return n
}

func (q *stripeQueue) pushFront(s *stripe) {
	s.next = q.head
	q.head = s
	if q.tail == nil {
		q.tail = s
	}
}

// handOff notes when a subchannel's first stripe of a message reaches the
// device: the start of the completion filter's delivery time.
func (e *engine) handOff(st *stripe) {
	x, bit := st.req.x, uint8(1)<<st.sub.idx
	if x.started&bit == 0 {
		x.started |= bit
		x.subStart[st.sub.idx] = e.opts.Clock.Now()
	}
}
