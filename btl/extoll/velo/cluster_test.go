package velo

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
	extolldynamic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
	extollstatic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_static"
	"github.com/gobtl/gobtl/policies/flowcontrol/none"
)

// cluster is n engines on a fabric, with senders that number their
// messages and receivers that check each arrives once and in order.
type cluster struct {
	f       *fabric
	eng     []*Engine
	pol     []core.FlowControl
	chk     []*checker
	nextSeq [][]uint32 // [src][dst] next message to send
	sent    int        // messages accepted by Send
	clock   *core.ManualClock
	metrics []*core.Metrics
	// control packets by pair, counted as they leave
	requests, responses [][]int
	failure             error
}

type checker struct {
	c    *cluster
	me   int
	seq  []uint32 // next expected message from each source
	idx  []uint16 // next expected packet of it
	done int
}

type testScheme int

const (
	schemeNone testScheme = iota
	schemeStatic
	schemeDynamic
)

func (s testScheme) String() string { return [...]string{"none", "static", "dynamic"}[s] }

func (s testScheme) policy(creditSlots int) core.FlowControl {
	switch s {
	case schemeStatic:
		return &extollstatic.Policy{CreditSlots: creditSlots}
	case schemeDynamic:
		return &extolldynamic.Policy{CreditSlots: creditSlots}
	}
	return none.Policy{}
}

type clusterOpts struct {
	n, slots    int
	scheme      testScheme
	creditSlots int
	piggyback   bool
	backlog     int
	threshold   func(q, k int) int
	unchecked   bool
	policy      func(rank int) core.FlowControl
}

func newCluster(o clusterOpts) (*cluster, error) {
	c := &cluster{f: newFabric(o.n, o.slots), clock: new(core.ManualClock)}
	c.nextSeq = make([][]uint32, o.n)
	c.requests = make([][]int, o.n)
	c.responses = make([][]int, o.n)
	for r := range o.n {
		c.nextSeq[r] = make([]uint32, o.n)
		c.requests[r] = make([]int, o.n)
		c.responses[r] = make([]int, o.n)
		pol := o.scheme.policy(o.creditSlots)
		if o.policy != nil {
			pol = o.policy(r)
		}
		m := core.NewMetrics()
		e, err := New(countingPort{port{c.f, r}, c}, Config{
			Rank: r, Size: o.n, Slots: o.slots, Policy: pol, Piggyback: o.piggyback,
			Backlog: o.backlog, Clock: c.clock, Metrics: m, Prefix: "extoll",
			threshold: o.threshold, unchecked: o.unchecked,
		})
		if err != nil {
			return nil, err
		}
		c.eng = append(c.eng, e)
		c.pol = append(c.pol, pol)
		c.metrics = append(c.metrics, m)
		c.chk = append(c.chk, &checker{c: c, me: r, seq: make([]uint32, o.n), idx: make([]uint16, o.n)})
	}
	if e := c.eng[0]; e.DataRegion() > 0 {
		c.f.dataRegion, c.f.creditSlots = e.DataRegion(), e.CreditSlots()
	}
	return c, nil
}

// countingPort counts control packets per pair as they leave.
type countingPort struct {
	port
	c *cluster
}

func (p countingPort) Send(dst int, pkts []nic.Slot) (int, error) {
	for i := range pkts {
		switch pkts[i].Tag() {
		case TagRequest:
			p.c.requests[p.rank][dst]++
		case TagResponse:
			p.c.responses[p.rank][dst]++
		}
	}
	return p.port.Send(dst, pkts)
}

// train builds message seq from src to dst as m packets, the last one
// holding last bytes.
func train(seq uint32, m, last int) []nic.Slot {
	pkts := make([]nic.Slot, m)
	for i := range pkts {
		n := nic.MaxPayload
		if i == m-1 {
			n = last
		}
		tag := uint8(1)
		if i == 0 {
			tag = 0
		}
		pkts[i].SetHeader(n, tag, false)
		a := pkts[i].Area()
		binary.LittleEndian.PutUint32(a[0:], seq)
		binary.LittleEndian.PutUint16(a[4:], uint16(i))
		binary.LittleEndian.PutUint16(a[6:], uint16(m))
		for j := 8; j < n; j++ {
			a[j] = byte(seq) ^ byte(j)
		}
	}
	return pkts
}

// send offers message m packets long from src to dst; it reports whether
// the engine took it.
func (c *cluster) send(src, dst, m, last int) (bool, error) {
	seq := c.nextSeq[src][dst]
	err := c.eng[src].Send(dst, train(seq, m, last))
	if errors.Is(err, core.ErrNoResources) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.nextSeq[src][dst]++
	c.sent++
	return true, nil
}

func (k *checker) Packet(src int, tag uint8, p []byte) {
	if k.c.failure != nil {
		return
	}
	if len(p) < 8 {
		k.c.failure = fmt.Errorf("rank %d: %d-byte packet from %d", k.me, len(p), src)
		return
	}
	seq, idx, m := binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint16(p[4:]), binary.LittleEndian.Uint16(p[6:])
	if seq != k.seq[src] || idx != k.idx[src] || (tag == 0) != (idx == 0) {
		k.c.failure = fmt.Errorf("rank %d from %d: packet %d of message %d (tag %d), want packet %d of message %d",
			k.me, src, idx, seq, tag, k.idx[src], k.seq[src])
		return
	}
	for j := 8; j < len(p); j++ {
		if p[j] != byte(seq)^byte(j) {
			k.c.failure = fmt.Errorf("rank %d from %d: message %d packet %d corrupt at byte %d", k.me, src, seq, idx, j)
			return
		}
	}
	k.idx[src]++
	if k.idx[src] == m {
		k.idx[src] = 0
		k.seq[src]++
		k.done++
	}
}

func (c *cluster) poll(r, max int) int { return c.eng[r].Poll(max, c.chk[r]) }

func (c *cluster) received() int {
	n := 0
	for _, k := range c.chk {
		n += k.done
	}
	return n
}

// check verifies the invariants that must hold at every step.
func (c *cluster) check() error {
	if c.failure != nil {
		return c.failure
	}
	if len(c.f.overflows) > 0 {
		return fmt.Errorf("mailbox overflow: %s", c.f.overflows[0])
	}
	for r, e := range c.eng {
		f := creditsOf(e)
		if f == nil {
			continue
		}
		for s := range c.eng {
			in, cur := e.Quota(s)
			if in < f.static {
				return fmt.Errorf("rank %d: sender %d's quota %d fell below its %d static slots", r, s, in, f.static)
			}
			if cur < 0 {
				return fmt.Errorf("rank %d: sender %d holds %d credits", r, s, cur)
			}
			req, resp := c.requests[r][s], c.responses[s][r]
			if resp > req || req > resp+1 {
				return fmt.Errorf("rank %d asked %d for credits %d times and got %d responses", r, s, req, resp)
			}
		}
		if f.available < f.reserve {
			return fmt.Errorf("rank %d: %d free data slots but %d reserved", r, f.available, f.reserve)
		}
	}
	return nil
}

// drain runs every process until all messages are in; it fails if
// progress stops first (a deadlock).
func (c *cluster) drain(maxRounds int) error {
	for round := 0; round < maxRounds; round++ {
		progress := c.f.deliverAll()
		for r := range c.eng {
			progress += c.poll(r, 1<<20)
			c.clock.Advance(core.PolicyPollInterval)
			c.eng[r].Tick()
		}
		if err := c.check(); err != nil {
			return err
		}
		if c.received() == c.sent && c.f.inFlight() == 0 && c.backlogged() == 0 {
			return c.settled()
		}
		if progress == 0 {
			return fmt.Errorf("deadlock: %d of %d messages received, %d packets waiting for credits, %d in flight, round %d\n%s",
				c.received(), c.sent, c.backlogged(), c.f.inFlight(), round, c.dump())
		}
	}
	return fmt.Errorf("no end after %d rounds", maxRounds)
}

// settled checks the end state: every compulsory request answered.
func (c *cluster) settled() error {
	for r := range c.eng {
		for s := range c.eng {
			if c.requests[r][s] != c.responses[s][r] {
				return fmt.Errorf("rank %d sent %d compulsory requests to %d, got %d responses", r, c.requests[r][s], s, c.responses[s][r])
			}
		}
	}
	return nil
}

func (c *cluster) backlogged() int {
	n := 0
	for _, e := range c.eng {
		for d := range c.eng {
			n += e.Backlog(d)
			if e.tx[d].wantReq || e.tx[d].wantResp {
				n++
			}
		}
	}
	return n
}

func (c *cluster) dump() string {
	s := ""
	for r, e := range c.eng {
		f := creditsOf(e)
		if f == nil {
			continue
		}
		s += fmt.Sprintf("rank %d: available %d reserve %d\n", r, f.available, f.reserve)
		for p := range c.eng {
			x, t := f.rx[p], e.tx[p]
			s += fmt.Sprintf("  from %d: fifo %v head %d intended %d current %d retrieved %d piggy %d owed %d blocked %v | to %d: credits %d backlog %d req %v resp %v\n",
				p, f.fifo[p*(f.k+1):(p+1)*(f.k+1)], x.head, x.intended, x.current, x.retrieved, x.piggy, x.owed, x.blocked, p, t.credits, t.qlen, t.wantReq, t.wantResp)
		}
	}
	return s
}

// creditsOf is the credit mechanism an engine runs, nil without credits.
func creditsOf(e *Engine) *credits {
	c, _ := e.fc.(*credits)
	return c
}

func (c *cluster) counter(r int, name string) int64 {
	return c.metrics[r].Counter("extoll.fc." + name).Load()
}
