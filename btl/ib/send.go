package ib

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// The send side: a frame is copied into a registered send buffer of the
// smallest queue whose receive buffers hold it (seed 002 §3: senders pick
// the smallest send buffer that fits, from free lists that grow on demand
// up to a limit) and posted on the RC QP of that queue; its buffer comes
// back with its send completion. RDMA writes and reads (rdma.go) go on the
// QP of the smallest queue, from memory registered through the device's
// pin-down cache (regcache.go). The send side knows nothing of credits:
// the credit engine stamps a frame's header before it is posted.

// sendSide is a module's send free lists, one per queue of the layout,
// the work request every post fills in place, the RDMA operations in
// flight, and the peers whose frames wait for their connection.
type sendSide struct {
	id    string
	log   zerolog.Logger
	pd    verbs.PD
	reg   *regCache    // the device's, shared by its modules
	cq    *completions // re-armed for a solicited RDMA operation
	depth int          // send work requests per QP (send_queue)

	lists []sendList
	bufs  []*sendBuf // by WRID index
	mrs   []verbs.MR
	wr    verbs.SendWR
	sg    [1]verbs.SGE
	ops   []opSlot
	free  []int32 // free slots of ops
	// waiting are the connected peers with frames that waited for their
	// connection still to go.
	waiting []*endpoint
	// completed counts send and RDMA completions: each gives back a
	// buffer and a send queue slot a refused frame may lack.
	completed uint64
	st        sendStats
}

// sendList is the free list of one queue's send buffers, grown on demand
// up to its bound.
type sendList struct {
	size int
	// bound is the most frames outstanding to one peer under flow
	// control: a shared queue's max_pending; for per-peer queues, which
	// credits bound, and shared ones without it, the send queue's depth.
	bound int
	free  *sendBuf
	n     int
	max   int
}

// sendBuf is a registered buffer a frame is copied into and sent from.
type sendBuf struct {
	mem   []byte
	addr  uint64
	lkey  uint32
	idx   uint32
	queue uint8
	n     int
	h     core.Header // stamped by the credit engine as it is posted
	flags core.SendFlags
	ep    *endpoint
	next  *sendBuf
}

// peerSends are the send side's state for one peer: the work requests
// outstanding on each of its QPs and the frames that wait for its
// connection, in order.
type peerSends struct {
	out     []int
	pending []*sendBuf
}

// sendStats are the send side's counters.
type sendStats struct {
	framesSent, bytesSent, puts, gets, rdmaBytes, noSendBuf *core.Counter
	mem                                                     *core.Gauge
}

func (st *sendStats) init(mx *core.Metrics, id string) {
	c := func(n string) *core.Counter { return mx.Counter(metricName(id, n)) }
	st.framesSent, st.bytesSent = c("frames_sent"), c("bytes_sent")
	st.puts, st.gets, st.rdmaBytes = c("rdma_puts"), c("rdma_gets"), c("rdma_bytes")
	st.noSendBuf = c("no_send_buffer")
	st.mem = mx.Gauge(metricName(id, "send_registered_bytes"))
}

// open sets the send side up for the layout's queues.
func (s *sendSide) open(m *module, queues []core.QueueSpec, freeListMax int) {
	s.id, s.log, s.pd, s.reg, s.cq, s.depth = m.id, m.log, m.h.pd, m.h.reg, &m.cq, m.cfg.sendQueue
	s.st.init(m.metrics, m.id)
	if freeListMax == 0 {
		freeListMax = 256
	}
	for _, q := range queues {
		l := sendList{size: q.BufSize, max: freeListMax, bound: s.depth}
		if q.Kind == core.QueueShared && q.MaxPending > 0 {
			l.bound = q.MaxPending
		}
		s.lists = append(s.lists, l)
	}
}

// close deregisters the send buffers.
func (s *sendSide) close() {
	for _, mr := range s.mrs {
		mr.Dereg()
	}
}

// queueFor returns the smallest queue holding an n-byte frame, or -1.
func (s *sendSide) queueFor(n int) int {
	for i := range s.lists {
		if n <= s.lists[i].size {
			return i
		}
	}
	return -1
}

// room says whether a frame may go to e on queue qi as far as the send
// side goes: a slot in the QP's send queue and, unless the frame
// bypasses flow control, room under a shared queue's pending bound.
func (s *sendSide) room(e *endpoint, qi int, flags core.SendFlags) error {
	out := e.tx.out[qi]
	if out >= s.depth {
		return errSQFull
	}
	if out >= s.lists[qi].bound && flags&core.SendNoFlowControl == 0 {
		return errPending
	}
	return nil
}

// get takes a send buffer of queue qi, growing its free list on demand up
// to its bound; nil when it is exhausted.
func (s *sendSide) get(qi int) *sendBuf {
	l := &s.lists[qi]
	if l.free == nil && l.n < l.max {
		s.grow(qi)
	}
	b := l.free
	if b != nil {
		l.free = b.next
		b.next = nil
	}
	return b
}

// exhausted counts a frame refused for want of a send buffer.
func (s *sendSide) exhausted() error {
	s.st.noSendBuf.Inc()
	return errNoSendBuf
}

// put returns b to its free list.
func (s *sendSide) put(b *sendBuf) {
	l := &s.lists[b.queue]
	b.ep = nil
	b.next = l.free
	l.free = b
}

// grow adds a chunk of send buffers to queue qi's free list (at most 32
// at a time, fewer for large buffers).
func (s *sendSide) grow(qi int) {
	l := &s.lists[qi]
	size := l.size
	n := min(l.max-l.n, max(1, min(32, (256<<10)/size)))
	mem, mr, err := slab(s.pd, n, size)
	if err != nil {
		s.log.Warn().Err(err).Msg("growing a send free list")
		l.max = l.n // stop trying
		return
	}
	s.mrs = append(s.mrs, mr)
	for i := 0; i < n; i++ {
		b := &sendBuf{mem: mem[i*size : (i+1)*size : (i+1)*size], lkey: mr.LKey(), queue: uint8(qi), idx: uint32(len(s.bufs))}
		b.addr = verbs.AddrOf(b.mem)
		s.bufs = append(s.bufs, b)
		b.next = l.free
		l.free = b
	}
	l.n += n
	s.st.mem.Add(int64(n * size))
}

// slab registers n buffers of size bytes in one region.
func slab(pd verbs.PD, n, size int) ([]byte, verbs.MR, error) {
	mem := make([]byte, n*size)
	mr, err := pd.RegMR(mem, verbs.AccessLocalWrite)
	if err != nil {
		return nil, nil, fmt.Errorf("register %d×%d bytes: %w", n, size, err)
	}
	return mem, mr, nil
}

// post puts b, its header stamped, on the wire to e; on an error the
// buffer is back on its free list.
func (s *sendSide) post(e *endpoint, b *sendBuf) error {
	qi := b.queue
	b.h.Encode(b.mem[:core.HeaderSize])
	wr := &s.wr
	wr.WRID = wridSend | uint64(b.idx)
	wr.Opcode = verbs.OpSend
	wr.Flags = verbs.SendSignaled
	if b.flags&core.SendSolicited != 0 {
		wr.Flags |= verbs.SendSolicited
	}
	s.sg[0] = verbs.SGE{Addr: b.addr, Length: uint32(b.n), LKey: b.lkey}
	wr.SG = s.sg[:]
	wr.RemoteAddr, wr.RKey = 0, 0
	if err := e.qps[qi].PostSend(wr); err != nil {
		s.put(b)
		return err
	}
	e.tx.out[qi]++
	s.st.framesSent.Inc()
	e.st.frames.Inc()
	s.st.bytesSent.Add(int64(b.n))
	return nil
}

// sent takes back the buffer of a send completion and returns the peer
// it went to (nil if it is gone).
func (s *sendSide) sent(idx int) *endpoint {
	b := s.bufs[idx]
	e := b.ep
	s.put(b)
	s.completed++
	if e != nil {
		e.tx.out[b.queue]--
	}
	return e
}

// wait keeps e on the list of peers whose frames wait to go.
func (s *sendSide) wait(e *endpoint) { s.waiting = append(s.waiting, e) }

// sendWaiting sends what waits on the peers whose connection is up, as far
// as credits and send queues allow, and keeps those with frames left.
func (s *sendSide) sendWaiting() {
	k := 0
	for _, e := range s.waiting {
		e.sendPending()
		if len(e.tx.pending) > 0 {
			s.waiting[k] = e
			k++
		}
	}
	clear(s.waiting[k:])
	s.waiting = s.waiting[:k]
}

// drop returns the frames waiting on a lost peer to their free lists.
func (s *sendSide) drop(e *endpoint) {
	for _, b := range e.tx.pending {
		s.put(b)
	}
	e.tx.pending = nil
}

// outstanding says whether e has work requests of ours outstanding:
// frames not yet acknowledged, RDMA not completed.
func (p *peerSends) outstanding() bool {
	for _, n := range p.out {
		if n > 0 {
			return true
		}
	}
	return false
}

// inFlight is the frames posted to the peer whose send has not completed
// and those waiting for the connection.
func (p *peerSends) inFlight() int {
	n := len(p.pending)
	for _, k := range p.out {
		n += k
	}
	return n
}

// metricName is a module's metric ib.<module>.<parts...>.
func metricName(id string, parts ...any) string {
	return core.MetricName(append([]any{"ib", id}, parts...)...)
}
