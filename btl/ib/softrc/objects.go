package softrc

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// QP numbers and memory keys are drawn at random, as a hardware HCA's
// are hard to predict: a process that can reach a port but is not of the
// job cannot name a QP or a region by counting (it cannot speak on an
// authenticated link either, auth.go). QP numbers are 24 bits, from 2 up
// (0 and 1 are the special QPs); keys are 32 bits, never 0.

// random32 returns a random number from crypto/rand.
func random32() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// newQPN draws an unused QP number. Called with d.mu held.
func (d *Device) newQPN() uint32 {
	for {
		n := random32() & (1<<24 - 1)
		if n >= 2 && d.qps[n] == nil {
			return n
		}
	}
}

// newKey draws an unused memory key. Called with d.mu held.
func (d *Device) newKey() uint32 {
	for {
		k := random32()
		if k != 0 && d.mrs[k] == nil {
			return k
		}
	}
}

// pd is a protection domain: memory regions and QPs of one PD only reach
// each other.
type pd struct {
	d    *Device
	objs int
	dead bool
}

// mr is a registered region. lkey and rkey are the same number, as on
// most HCAs.
type mr struct {
	d      *Device
	pd     *pd
	buf    []byte
	addr   uint64
	key    uint32
	access verbs.Access
	dead   bool
}

func (m *mr) Addr() uint64  { return m.addr }
func (m *mr) Len() int      { return len(m.buf) }
func (m *mr) LKey() uint32  { return m.key }
func (m *mr) RKey() uint32  { return m.key }
func (m *mr) Bytes() []byte { return m.buf }

// slice returns the registered bytes [addr, addr+n), if the region holds
// them.
func (m *mr) slice(addr, n uint64) ([]byte, bool) {
	if addr < m.addr || n > uint64(len(m.buf)) || addr-m.addr > uint64(len(m.buf))-n {
		return nil, false
	}
	off := addr - m.addr
	return m.buf[off : off+n : off+n], true
}

// Dereg deregisters the region; later remote accesses with its key fail.
func (m *mr) Dereg() error {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	if m.dead {
		return nil
	}
	m.dead = true
	delete(m.d.mrs, m.key)
	m.pd.objs--
	m.buf = nil
	return nil
}

// RegMR registers buf.
func (p *pd) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	d := p.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.dead || d.closed {
		return nil, fmt.Errorf("softrc: %s: register: %w", d.name, verbs.ErrClosed)
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("softrc: %s: register an empty buffer: %w", d.name, verbs.ErrInvalid)
	}
	if access&(verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic) != 0 && access&verbs.AccessLocalWrite == 0 {
		// The IBA requires local write with remote write or atomic.
		return nil, fmt.Errorf("softrc: %s: remote write access needs local write access: %w", d.name, verbs.ErrInvalid)
	}
	key := d.newKey()
	m := &mr{d: d, pd: p, buf: buf, addr: verbs.AddrOf(buf), key: key, access: access}
	d.mrs[key] = m
	p.objs++
	return m, nil
}

// ah is an address handle.
type ah struct {
	attr verbs.AHAttr
	pd   *pd
}

func (a *ah) Destroy() error { return nil }

// CreateAH creates an address handle.
func (p *pd) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	return &ah{attr: attr, pd: p}, nil
}

// Dealloc releases the PD.
func (p *pd) Dealloc() error {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if p.objs > 0 {
		return fmt.Errorf("softrc: %s: dealloc PD with %d objects: %w", p.d.name, p.objs, verbs.ErrInvalid)
	}
	if !p.dead {
		p.dead = true
		p.d.pds--
	}
	return nil
}

// CreateQP creates a QP in RESET.
func (p *pd) CreateQP(attr verbs.QPInitAttr) (verbs.QP, error) {
	d := p.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.dead || d.closed {
		return nil, fmt.Errorf("softrc: %s: create QP: %w", d.name, verbs.ErrClosed)
	}
	if attr.Type != verbs.QPTypeRC && attr.Type != verbs.QPTypeUD {
		return nil, fmt.Errorf("softrc: %s: QP type %v: %w", d.name, attr.Type, verbs.ErrInvalid)
	}
	scq, ok1 := attr.SendCQ.(*cq)
	rcq, ok2 := attr.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq == nil || rcq == nil || scq.d != d || rcq.d != d {
		return nil, fmt.Errorf("softrc: %s: create QP needs send and receive CQs of this device: %w", d.name, verbs.ErrInvalid)
	}
	var s *srq
	if attr.SRQ != nil {
		if s, _ = attr.SRQ.(*srq); s == nil || s.d != d {
			return nil, fmt.Errorf("softrc: %s: create QP: SRQ of another device: %w", d.name, verbs.ErrInvalid)
		}
		if attr.Type != verbs.QPTypeRC {
			return nil, fmt.Errorf("softrc: %s: an SRQ serves RC QPs only: %w", d.name, verbs.ErrInvalid)
		}
	}
	c := attr.Cap
	if c.MaxSendWR <= 0 || c.MaxSendWR > maxQPWR || (s == nil && (c.MaxRecvWR <= 0 || c.MaxRecvWR > maxQPWR)) {
		return nil, fmt.Errorf("softrc: %s: create QP: queue sizes %d/%d not in [1,%d]: %w", d.name, c.MaxSendWR, c.MaxRecvWR, maxQPWR, verbs.ErrInvalid)
	}
	if c.MaxSendSGE <= 0 {
		c.MaxSendSGE = 1
	}
	if c.MaxRecvSGE <= 0 {
		c.MaxRecvSGE = 1
	}
	if c.MaxSendSGE > maxSGE || c.MaxRecvSGE > maxSGE {
		return nil, fmt.Errorf("softrc: %s: create QP: at most %d SGEs: %w", d.name, maxSGE, verbs.ErrInvalid)
	}
	q := &qp{d: d, pd: p, typ: attr.Type, scq: scq, rcq: rcq, srq: s, sigAll: attr.SigAll, cap: c, state: verbs.QPReset}
	q.sq = make([]swqe, c.MaxSendWR)
	q.sqSegs = make([][]byte, c.MaxSendWR*c.MaxSendSGE)
	if s == nil {
		q.rq = make([]rwqe, c.MaxRecvWR)
		q.rqSegs = make([][]byte, c.MaxRecvWR*c.MaxRecvSGE)
	}
	q.qpn = d.newQPN()
	d.qps[q.qpn] = q
	p.objs++
	return q, nil
}

// ---- completion queues and channels ----

const (
	armNone = iota
	armSolicited
	armAny
)

// cq is a completion queue: a ring of work completions.
type cq struct {
	d      *Device
	ring   []verbs.WC
	head   int
	n      int
	armed  uint8
	ch     *channel
	events int // delivered, not yet acknowledged
	err    error
	dead   bool
}

// CreateCQ creates a completion queue.
func (d *Device) CreateCQ(cqe int, ch verbs.CompChannel) (verbs.CQ, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("softrc: %s: create CQ: %w", d.name, verbs.ErrClosed)
	}
	if cqe <= 0 || cqe > maxCQE {
		return nil, fmt.Errorf("softrc: %s: CQ of %d entries not in [1,%d]: %w", d.name, cqe, maxCQE, verbs.ErrInvalid)
	}
	c := &cq{d: d, ring: make([]verbs.WC, cqe)}
	if ch != nil {
		x, ok := ch.(*channel)
		if !ok || x.d != d {
			return nil, fmt.Errorf("softrc: %s: completion channel of another device: %w", d.name, verbs.ErrInvalid)
		}
		c.ch = x
		x.cqs++
	}
	d.cqs[c] = struct{}{}
	return c, nil
}

// push adds a completion and raises the channel event an armed CQ owes.
// Called with d.mu held.
func (c *cq) push(wc verbs.WC, solicited bool) {
	if c.dead {
		return
	}
	if c.n == len(c.ring) {
		if c.err == nil {
			c.err = fmt.Errorf("softrc: %s: CQ overrun (%d entries): %w", c.d.name, len(c.ring), verbs.ErrQueueFull)
			c.d.raise(verbs.AsyncEvent{Type: verbs.EventCQErr, CQ: c})
		}
		return
	}
	c.ring[(c.head+c.n)%len(c.ring)] = wc
	c.n++
	if c.armed == armAny || (c.armed == armSolicited && (solicited || wc.Status != verbs.WCSuccess)) {
		c.setArmed(armNone)
		if c.ch != nil {
			c.ch.fire(c)
		}
	}
}

// Poll returns completions. While the process polls, the device does its
// work here, inline: the wire is read and written by the polling thread.
func (c *cq) Poll(wc []verbs.WC) (int, error) {
	d := c.d
	d.mu.Lock()
	if c.dead || d.closed {
		d.mu.Unlock()
		return 0, fmt.Errorf("softrc: %s: poll CQ: %w", d.name, verbs.ErrClosed)
	}
	now := d.pollEnter()
	if c.n < len(wc) {
		d.progress(now)
	}
	n := 0
	for n < len(wc) && c.n > 0 {
		wc[n] = c.ring[c.head]
		c.head = (c.head + 1) % len(c.ring)
		c.n--
		n++
	}
	err := c.err
	d.mu.Unlock()
	return n, err
}

// ReqNotify arms the CQ for one event.
func (c *cq) ReqNotify(solicitedOnly bool) error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.dead {
		return fmt.Errorf("softrc: %s: arm CQ: %w", c.d.name, verbs.ErrClosed)
	}
	if c.ch == nil {
		return fmt.Errorf("softrc: %s: arm a CQ without a completion channel: %w", c.d.name, verbs.ErrInvalid)
	}
	if solicitedOnly {
		if c.armed != armAny {
			c.setArmed(armSolicited)
		}
	} else {
		c.setArmed(armAny)
	}
	c.d.engage()
	return nil
}

// setArmed changes how c is armed and keeps the device's count of armed
// CQs (d.mu held).
func (c *cq) setArmed(a uint8) {
	switch {
	case c.armed == armNone && a != armNone:
		c.d.armedCQs++
	case c.armed != armNone && a == armNone:
		c.d.armedCQs--
	}
	c.armed = a
}

// AckEvents acknowledges n events.
func (c *cq) AckEvents(n int) {
	c.d.mu.Lock()
	c.events -= n
	if c.events < 0 {
		c.events = 0
	}
	c.d.mu.Unlock()
}

// Destroy releases the CQ.
func (c *cq) Destroy() error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	for _, q := range c.d.qps {
		if q.scq == c || q.rcq == c {
			return fmt.Errorf("softrc: %s: destroy CQ still used by QP %#x: %w", c.d.name, q.qpn, verbs.ErrInvalid)
		}
	}
	if !c.dead {
		c.setArmed(armNone)
		c.dead = true
		delete(c.d.cqs, c)
		if c.ch != nil {
			c.ch.cqs--
		}
	}
	return nil
}

// channel is a completion event channel. Events are queued under d.mu and
// announced by the doorbell's token, which a sleeping progress thread
// waits on (the interrupt of seed 004 §4.3).
type channel struct {
	verbs.Doorbell
	d       *Device
	pending []*cq
	cqs     int
	dead    bool
}

// CreateCompChannel creates a completion channel.
func (d *Device) CreateCompChannel() (verbs.CompChannel, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("softrc: %s: create channel: %w", d.name, verbs.ErrClosed)
	}
	return &channel{Doorbell: verbs.NewDoorbell(), d: d}, nil
}

func (ch *channel) fire(c *cq) {
	c.events++
	ch.pending = append(ch.pending, c)
	ch.Wake()
}

// GetEvent returns the CQ of the next pending event.
func (ch *channel) GetEvent() (verbs.CQ, bool) {
	ch.d.mu.Lock()
	defer ch.d.mu.Unlock()
	if len(ch.pending) == 0 {
		return nil, false
	}
	c := ch.pending[0]
	copy(ch.pending, ch.pending[1:])
	ch.pending = ch.pending[:len(ch.pending)-1]
	return c, true
}

// Destroy releases the channel.
func (ch *channel) Destroy() error {
	ch.d.mu.Lock()
	defer ch.d.mu.Unlock()
	if ch.cqs > 0 {
		return fmt.Errorf("softrc: %s: destroy channel with %d CQs: %w", ch.d.name, ch.cqs, verbs.ErrInvalid)
	}
	ch.dead = true
	return nil
}

// ---- shared receive queues ----

// srq is a shared receive queue: one FIFO of receive WQEs that many QPs
// consume from, with the limit event of the IBA.
type srq struct {
	d     *Device
	pd    *pd
	ring  []rwqe
	segs  [][]byte
	sge   int
	head  uint64
	tail  uint64
	limit int
	dead  bool
}

// CreateSRQ creates a shared receive queue.
func (p *pd) CreateSRQ(attr verbs.SRQInitAttr) (verbs.SRQ, error) {
	d := p.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if attr.MaxWR <= 0 || attr.MaxWR > maxSRQWR {
		return nil, fmt.Errorf("softrc: %s: SRQ of %d WRs not in [1,%d]: %w", d.name, attr.MaxWR, maxSRQWR, verbs.ErrInvalid)
	}
	if attr.MaxSGE <= 0 {
		attr.MaxSGE = 1
	}
	if attr.MaxSGE > maxSGE || attr.Limit < 0 || attr.Limit > attr.MaxWR {
		return nil, fmt.Errorf("softrc: %s: SRQ SGEs %d (max %d) or limit %d: %w", d.name, attr.MaxSGE, maxSGE, attr.Limit, verbs.ErrInvalid)
	}
	p.objs++
	return &srq{d: d, pd: p, ring: make([]rwqe, attr.MaxWR), segs: make([][]byte, attr.MaxWR*attr.MaxSGE), sge: attr.MaxSGE, limit: attr.Limit}, nil
}

// PostRecv posts a receive WQE to the SRQ.
func (s *srq) PostRecv(wr *verbs.RecvWR) error {
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.dead || d.closed {
		return fmt.Errorf("softrc: %s: SRQ post: %w", d.name, verbs.ErrClosed)
	}
	if len(wr.SG) > s.sge {
		return fmt.Errorf("softrc: %s: SRQ post with %d SGEs, max %d: %w", d.name, len(wr.SG), s.sge, verbs.ErrInvalid)
	}
	if s.tail-s.head >= uint64(len(s.ring)) {
		return fmt.Errorf("softrc: %s: SRQ full (%d): %w", d.name, len(s.ring), verbs.ErrQueueFull)
	}
	slot := int(s.tail % uint64(len(s.ring)))
	base := slot * s.sge
	dst := s.segs[base : base : base+s.sge]
	var total int
	for _, e := range wr.SG {
		m := d.mrs[e.LKey]
		if m == nil || m.dead || m.pd != s.pd || m.access&verbs.AccessLocalWrite == 0 {
			return fmt.Errorf("softrc: %s: SRQ post: lkey %#x: %w", d.name, e.LKey, verbs.ErrProtection)
		}
		b, ok := m.slice(e.Addr, uint64(e.Length))
		if !ok {
			return fmt.Errorf("softrc: %s: SRQ post: SGE outside its region: %w", d.name, verbs.ErrProtection)
		}
		dst = append(dst, b)
		total += len(b)
	}
	s.ring[slot] = rwqe{wrid: wr.WRID, segs: dst, length: total}
	s.tail++
	return nil
}

// take consumes the head WQE; crossing below the armed limit raises the
// limit event once and disarms it.
func (s *srq) take() (rwqe, bool) {
	if s.head == s.tail {
		return rwqe{}, false
	}
	w := s.ring[s.head%uint64(len(s.ring))]
	s.ring[s.head%uint64(len(s.ring))].segs = nil
	s.head++
	if s.limit > 0 && int(s.tail-s.head) < s.limit {
		s.raiseLimit()
	}
	return w, true
}

func (s *srq) raiseLimit() {
	s.limit = 0
	s.d.raise(verbs.AsyncEvent{Type: verbs.EventSRQLimitReached, SRQ: s})
}

// Arm sets the SRQ limit.
func (s *srq) Arm(limit int) error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if limit < 0 || limit > len(s.ring) {
		return fmt.Errorf("softrc: %s: SRQ limit %d not in [0,%d]: %w", s.d.name, limit, len(s.ring), verbs.ErrInvalid)
	}
	s.limit = limit
	if limit > 0 && int(s.tail-s.head) < limit {
		s.raiseLimit()
	}
	return nil
}

// Query returns the SRQ's attributes.
func (s *srq) Query() (verbs.SRQAttr, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return verbs.SRQAttr{MaxWR: len(s.ring), Limit: s.limit}, nil
}

// Posted is how many WQEs the SRQ holds (softrc extension for tests and
// counters).
func (s *srq) Posted() int {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return int(s.tail - s.head)
}

// Destroy releases the SRQ.
func (s *srq) Destroy() error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	for _, q := range s.d.qps {
		if q.srq == s {
			return fmt.Errorf("softrc: %s: destroy SRQ still used by QP %#x: %w", s.d.name, q.qpn, verbs.ErrInvalid)
		}
	}
	if !s.dead {
		s.dead = true
		s.pd.objs--
	}
	return nil
}
