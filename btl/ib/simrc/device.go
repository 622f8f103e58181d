package simrc

import (
	"fmt"
	"slices"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// Device is a rank's simulated HCA.
type Device struct {
	f       *Fabric
	rank    int
	name    string
	ports   []*port
	qps     map[uint32]*qp
	mrs     map[uint32]*mr
	srqs    []*srq
	nextQPN uint32
	nextKey uint32
	async   []verbs.AsyncEvent
	closed  bool
	empty   int // consecutive empty CQ polls
	st      Stats
}

// Stats are a device's counters.
type Stats struct {
	// Sends, Writes, Reads count RC work requests that reached the peer;
	// Bytes their payload. Datagrams counts UD sends (connection setup).
	Sends, Writes, Reads, Datagrams int64
	Bytes                           int64
	// RNRNaks counts RNR NAKs this device's QPs received as requester.
	RNRNaks int64
	// Registered is the memory registered now; PeakRegistered its peak.
	Registered, PeakRegistered int64
	// PostedRecvBytes is the memory of the receive WQEs posted now (QPs
	// and SRQs), PeakPostedRecvBytes its peak.
	PostedRecvBytes, PeakPostedRecvBytes int64
	// MaxPostedPerQP is the most receive WQEs any RC QP of this device
	// had posted at once (per-peer buffers); MaxPostedPerSRQ the same for
	// SRQs.
	MaxPostedPerQP, MaxPostedPerSRQ int
	// QPs counts RC QPs created.
	QPs int
	// MaxReadsOutstanding is the most RDMA reads one QP had on the wire.
	MaxReadsOutstanding int
}

// Stats returns the device's counters.
func (d *Device) Stats() Stats { return d.st }

// Rank is the rank the device belongs to.
func (d *Device) Rank() int { return d.rank }

// Name is the device's name.
func (d *Device) Name() string { return d.name }

// Query returns the device's limits.
func (d *Device) Query() (verbs.DeviceAttr, error) {
	return verbs.DeviceAttr{FWVer: "sim", NodeGUID: uint64(d.rank)<<8 | 1, PhysPortCnt: len(d.ports), MaxMRSize: 1 << 40,
		MaxQP: 1 << 20, MaxQPWR: 16384, MaxSGE: 16, MaxCQ: 1 << 16, MaxCQE: 1 << 22, MaxMR: 1 << 20, MaxPD: 1 << 10,
		MaxQPRdAtom: 16, MaxQPInitRdAtom: 16, MaxSRQ: 1 << 10, MaxSRQWR: 1 << 16, MaxSRQSGE: 16}, nil
}

// QueryPort returns a port's attributes.
func (d *Device) QueryPort(num uint8) (verbs.PortAttr, error) {
	if num == 0 || int(num) > len(d.ports) {
		return verbs.PortAttr{}, fmt.Errorf("simrc: %s port %d: %w", d.name, num, verbs.ErrNoDevice)
	}
	p := d.ports[num-1]
	return verbs.PortAttr{State: verbs.PortActive, MaxMTU: verbs.MTU4096, ActiveMTU: verbs.MTU4096, LID: p.lid, GID: p.gid,
		LinkLayer: verbs.LinkInfiniBand, Rate: p.link.Rate}, nil
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (verbs.PD, error) { return &pd{d: d}, nil }

// CreateCompChannel creates a completion channel.
func (d *Device) CreateCompChannel() (verbs.CompChannel, error) {
	return &channel{Doorbell: verbs.NewDoorbell()}, nil
}

// CreateCQ creates a completion queue.
func (d *Device) CreateCQ(cqe int, ch verbs.CompChannel) (verbs.CQ, error) {
	c := &cq{d: d}
	if ch != nil {
		x, ok := ch.(*channel)
		if !ok {
			return nil, fmt.Errorf("simrc: a completion channel of another provider: %w", verbs.ErrInvalid)
		}
		c.ch = x
	}
	return c, nil
}

// PollAsyncEvent returns the next asynchronous event.
func (d *Device) PollAsyncEvent() (verbs.AsyncEvent, bool) {
	if len(d.async) == 0 {
		return verbs.AsyncEvent{}, false
	}
	ev := d.async[0]
	d.async = d.async[1:]
	return ev, true
}

func (d *Device) raise(ev verbs.AsyncEvent) {
	d.async = append(d.async, ev)
	d.f.s.Notify(d.rank)
}

// Close closes the device.
func (d *Device) Close() error {
	d.closed = true
	// In QP number order: a map's order would make runs differ.
	qpns := make([]uint32, 0, len(d.qps))
	for n := range d.qps {
		qpns = append(qpns, n)
	}
	slices.Sort(qpns)
	for _, n := range qpns {
		d.qps[n].toErr()
	}
	return nil
}

type pd struct{ d *Device }

type mr struct {
	pd     *pd
	buf    []byte
	addr   uint64
	key    uint32
	access verbs.Access
}

func (m *mr) Addr() uint64  { return m.addr }
func (m *mr) Len() int      { return len(m.buf) }
func (m *mr) LKey() uint32  { return m.key }
func (m *mr) RKey() uint32  { return m.key }
func (m *mr) Bytes() []byte { return m.buf }
func (m *mr) Dereg() error {
	d := m.pd.d
	if d.mrs[m.key] == m {
		delete(d.mrs, m.key)
		d.st.Registered -= int64(len(m.buf))
	}
	return nil
}

func (p *pd) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("simrc: register an empty buffer: %w", verbs.ErrInvalid)
	}
	d := p.d
	d.nextKey++
	m := &mr{pd: p, buf: buf, addr: verbs.AddrOf(buf), key: d.nextKey<<8 | uint32(d.rank&0xff), access: access}
	d.mrs[m.key] = m
	d.st.Registered += int64(len(buf))
	d.st.PeakRegistered = max(d.st.PeakRegistered, d.st.Registered)
	return m, nil
}

// slice resolves [addr, addr+n) under key with access.
func (d *Device) slice(key uint32, addr, n uint64, access verbs.Access) ([]byte, bool) {
	m := d.mrs[key]
	if m == nil || m.access&access != access || addr < m.addr || addr+n > m.addr+uint64(len(m.buf)) {
		return nil, false
	}
	o := addr - m.addr
	return m.buf[o : o+n], true
}

// gather resolves scatter/gather entries to slices.
func (d *Device) gather(sg []verbs.SGE) ([][]byte, int, bool) {
	var out [][]byte
	n := 0
	for _, e := range sg {
		b, ok := d.slice(e.LKey, e.Addr, uint64(e.Length), 0)
		if !ok {
			return nil, 0, false
		}
		out = append(out, b)
		n += len(b)
	}
	return out, n, true
}

type ah struct{ attr verbs.AHAttr }

func (a *ah) Destroy() error { return nil }

func (p *pd) CreateAH(attr verbs.AHAttr) (verbs.AH, error) { return &ah{attr: attr}, nil }
func (p *pd) Dealloc() error                               { return nil }

// emptyPolls is how many empty polls in a row count as waiting.
const emptyPolls = 64

type cq struct {
	d       *Device
	q       []verbs.WC
	head    int
	armed   bool
	solOnly bool
	ch      *channel
}

func (c *cq) push(wc verbs.WC, solicited bool) {
	c.q = append(c.q, wc)
	if c.armed && (!c.solOnly || solicited || wc.Status != verbs.WCSuccess) {
		c.armed = false
		if c.ch != nil {
			c.ch.events = append(c.ch.events, c)
			c.ch.Wake()
		}
	}
	c.d.f.s.Notify(c.d.rank)
}

func (c *cq) Poll(wc []verbs.WC) (int, error) {
	n := copy(wc, c.q[c.head:])
	if n == 0 {
		// A caller that polls in a loop of its own, not the pml's
		// back-off (the BTL's goodbye at close), must let virtual time
		// move too.
		if c.d.empty++; c.d.empty >= emptyPolls {
			c.d.empty = 0
			c.d.f.s.Idle()
		}
		return 0, nil
	}
	c.d.empty = 0
	c.head += n
	if c.head == len(c.q) {
		c.q, c.head = c.q[:0], 0
	}
	// The frames are the rank's once it has spent o_r on each: other
	// ranks run meanwhile, and what lands waits for the next poll.
	if busy := c.d.recvCPU(wc[:n]); busy > 0 {
		c.d.f.s.Compute(busy)
	}
	return n, nil
}

// recvCPU is the CPU time the receiver spends on the received frames
// among wc: o_r of the port each arrived on.
func (d *Device) recvCPU(wc []verbs.WC) time.Duration {
	var t time.Duration
	for i := range wc {
		if wc[i].Opcode != verbs.WCRecv || wc[i].Status != verbs.WCSuccess {
			continue
		}
		if q := d.qps[wc[i].QPN]; q != nil && q.port != nil {
			t += q.port.link.RecvOverhead
		}
	}
	return t
}

func (c *cq) ReqNotify(solicitedOnly bool) error {
	c.armed, c.solOnly = true, solicitedOnly
	return nil
}

func (c *cq) AckEvents(int)  {}
func (c *cq) Destroy() error { return nil }

type channel struct {
	verbs.Doorbell
	events []*cq
}

func (ch *channel) GetEvent() (verbs.CQ, bool) {
	if len(ch.events) == 0 {
		return nil, false
	}
	c := ch.events[0]
	ch.events = ch.events[1:]
	return c, true
}

func (ch *channel) Destroy() error { return nil }

// rwqe is a posted receive.
type rwqe struct {
	wrid uint64
	sg   []verbs.SGE
	len  int
}

func (d *Device) recvWQE(wr *verbs.RecvWR) rwqe {
	w := rwqe{wrid: wr.WRID, sg: append([]verbs.SGE(nil), wr.SG...)}
	for _, e := range wr.SG {
		w.len += int(e.Length)
	}
	d.st.PostedRecvBytes += int64(w.len)
	d.st.PeakPostedRecvBytes = max(d.st.PeakPostedRecvBytes, d.st.PostedRecvBytes)
	return w
}

// rqueue is a FIFO of posted receives, consumed in order (a QP's
// receive queue or an SRQ).
type rqueue struct {
	q    []rwqe
	head int
}

func (r *rqueue) posted() int { return len(r.q) - r.head }

func (r *rqueue) push(w rwqe) { r.q = append(r.q, w) }

// pop takes the head WQE and uncounts its memory.
func (r *rqueue) pop(d *Device) (rwqe, bool) {
	if r.posted() == 0 {
		return rwqe{}, false
	}
	w := r.q[r.head]
	r.head++
	if r.head == len(r.q) {
		r.q, r.head = r.q[:0], 0
	}
	d.st.PostedRecvBytes -= int64(w.len)
	return w, true
}

type srq struct {
	d     *Device
	rq    rqueue
	max   int
	limit int
}

func (p *pd) CreateSRQ(attr verbs.SRQInitAttr) (verbs.SRQ, error) {
	s := &srq{d: p.d, max: attr.MaxWR, limit: attr.Limit}
	p.d.srqs = append(p.d.srqs, s)
	return s, nil
}

func (s *srq) posted() int { return s.rq.posted() }

func (s *srq) PostRecv(wr *verbs.RecvWR) error {
	if s.posted() >= s.max {
		return fmt.Errorf("simrc: SRQ full (%d): %w", s.max, verbs.ErrQueueFull)
	}
	s.rq.push(s.d.recvWQE(wr))
	s.d.st.MaxPostedPerSRQ = max(s.d.st.MaxPostedPerSRQ, s.posted())
	return nil
}

func (s *srq) take() (rwqe, bool) {
	w, ok := s.rq.pop(s.d)
	if !ok {
		return w, false
	}
	if s.limit > 0 && s.posted() < s.limit {
		s.limit = 0
		s.d.raise(verbs.AsyncEvent{Type: verbs.EventSRQLimitReached, SRQ: s})
	}
	return w, true
}

func (s *srq) Arm(limit int) error {
	if limit < 0 || limit > s.max {
		return fmt.Errorf("simrc: SRQ limit %d of %d: %w", limit, s.max, verbs.ErrInvalid)
	}
	s.limit = limit
	if limit > 0 && s.posted() < limit {
		s.limit = 0
		s.d.raise(verbs.AsyncEvent{Type: verbs.EventSRQLimitReached, SRQ: s})
	}
	return nil
}

func (s *srq) Query() (verbs.SRQAttr, error) { return verbs.SRQAttr{MaxWR: s.max, Limit: s.limit}, nil }
func (s *srq) Destroy() error                { return nil }
