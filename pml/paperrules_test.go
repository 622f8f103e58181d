package pml

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/core"
)

// The rules of seed 004 that the PML keeps itself, each pinned against a
// device that does not keep it for the PML (scripts/mutants.sh breaks
// each rule and expects these tests to fail).

// unboundedReads is an inproc module whose endpoints count the RDMA reads
// outstanding at the device and never refuse one: unlike softrc, which
// queues reads beyond max_rd_atomic itself, it bounds nothing, so the
// only bound is the PML's token bucket (seed 004 §4.2).
type unboundedReads struct {
	*inproc.Module
	mu          sync.Mutex
	out, most   int
	gets        int
	arms, wakes int
}

func (m *unboundedReads) Endpoint(rank int) (core.Endpoint, error) {
	ep, err := m.Module.Endpoint(rank)
	if err != nil {
		return nil, err
	}
	return &countingEndpoint{Endpoint: ep, rdma: ep.(core.RDMA), m: m}, nil
}

// Arm counts the PML's requests for a notification (seed 004 §4.3).
func (m *unboundedReads) Arm() {
	m.mu.Lock()
	m.arms++
	m.mu.Unlock()
	m.Module.Arm()
}

type countingEndpoint struct {
	core.Endpoint
	rdma core.RDMA
	m    *unboundedReads
}

func (e *countingEndpoint) Put(op *core.RDMAOp) error { return e.rdma.Put(op) }

func (e *countingEndpoint) Get(op *core.RDMAOp) error {
	c := &readDone{m: e.m, next: op.Done}
	op.Done = c
	if err := e.rdma.Get(op); err != nil {
		op.Done = c.next
		return err
	}
	e.m.mu.Lock()
	e.m.out++
	e.m.gets++
	e.m.most = max(e.m.most, e.m.out)
	e.m.mu.Unlock()
	return nil
}

type readDone struct {
	m    *unboundedReads
	next core.Completer
}

func (c *readDone) RDMADone(op *core.RDMAOp, err error) {
	c.m.mu.Lock()
	c.m.out--
	c.m.mu.Unlock()
	op.Done = c.next
	c.next.RDMADone(op, err)
}

// countingWorld is n ranks over one inproc rail whose modules count reads
// and notification requests.
func countingWorld(t *testing.T, n int, rail inproc.RailOptions, opts Options) (*world, []*unboundedReads) {
	t.Helper()
	f := inproc.New(n, nil)
	f.Rail("rail0", rail)
	w := &world{f: f}
	var mods []*unboundedReads
	for r := range n {
		m := &unboundedReads{Module: f.Module(r, 0)}
		mods = append(mods, m)
		o := opts
		o.Metrics = core.NewMetrics()
		c, err := New(r, n, []core.Module{self.New(r, 64<<10, 256<<10), m}, o)
		if err != nil {
			t.Fatal(err)
		}
		w.comms = append(w.comms, c)
	}
	t.Cleanup(w.close)
	return w, mods
}

// Seed 004 §4.2: "the number of outstanding RDMA read operations is
// limited", so the PML keeps a token bucket per endpoint and queues reads
// beyond it in FIFO order. Eight 256 KiB messages cut into 32 KiB reads
// are 64 reads at once; a device that bounds nothing must see at most
// MaxReads of them outstanding.
func TestTheReadTokenBucketBoundsOutstandingReadsAtADeviceThatDoesNot(t *testing.T) {
	const maxReads, msgs, size = 2, 8, 256 << 10
	w, mods := countingWorld(t, 2, inproc.RailOptions{MaxReads: maxReads, MaxRDMA: 32 << 10}, Options{Protocol: ProtoRead})
	w.run(t, func(c *Comm) error {
		var reqs []*Request
		for i := range msgs {
			var r *Request
			var err error
			if c.Rank() == 0 {
				r, err = c.Isend(pattern(make([]byte, size), i), 1, i)
			} else {
				r, err = c.Irecv(make([]byte, size), 0, i)
			}
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		return c.Waitall(reqs, nil)
	})
	m := mods[1] // the receiver reads
	if m.gets < msgs*size/(32<<10) {
		t.Fatalf("%d reads issued, want at least %d", m.gets, msgs*size/(32<<10))
	}
	if m.most > maxReads {
		t.Fatalf("%d reads outstanding at once at the device, the bound is %d", m.most, maxReads)
	}
	if m.most < maxReads {
		t.Fatalf("at most %d reads outstanding: the test did not fill the bucket of %d", m.most, maxReads)
	}
}

// Seed 004 §4.3: interrupts are requested dynamically, only while
// receives are pending — a rank with nothing to receive is not woken.
// The progress thread re-arms after a drain only if work is left.
func TestTheAsyncProgressArmsOnlyWhileReceivesArePending(t *testing.T) {
	w, mods := countingWorld(t, 2, inproc.RailOptions{}, Options{Protocol: ProtoReadAsync})
	c := w.comms[0]
	e, a := c.e, c.e.async
	arms := func() int {
		mods[0].mu.Lock()
		defer mods[0].mu.Unlock()
		return mods[0].arms
	}
	e.mu.Lock()
	a.armed = false
	before := arms()
	a.arm()
	idle := arms() - before
	e.mu.Unlock()
	if idle != 0 {
		t.Fatalf("nothing pending: %d notification requests, want none", idle)
	}
	r, err := c.Irecv(make([]byte, 8), 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := arms() - before; got != 1 {
		t.Fatalf("a receive posted: %d notification requests, want 1", got)
	}
	if err := w.comms[1].Send(make([]byte, 8), 0, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(r); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	a.armed = false
	before = arms()
	a.arm()
	after := arms() - before
	e.mu.Unlock()
	if after != 0 {
		t.Fatalf("the receive completed: %d notification requests, want none", after)
	}
}

// A rendezvous send of rdma_read_async arms the notifiers until the
// receiver has read it: a software device serves the reads from its NIC
// goroutine at once when armed (seed 004 §5.1's sender overlap), not once
// it has seen no poll for a while.
func TestAReadAsyncSendArmsUntilItsDataIsRead(t *testing.T) {
	w, mods := countingWorld(t, 2, inproc.RailOptions{}, Options{Protocol: ProtoReadAsync})
	c := w.comms[0]
	e, a := c.e, c.e.async
	arms := func() int {
		mods[0].mu.Lock()
		defer mods[0].mu.Unlock()
		return mods[0].arms
	}
	e.mu.Lock()
	a.armed = false
	e.mu.Unlock()
	before := arms()
	buf := make([]byte, 1<<20)
	s, err := c.Isend(buf, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := arms() - before; got != 1 {
		t.Fatalf("a rendezvous send started: %d notification requests, want 1", got)
	}
	e.mu.Lock()
	inFlight := e.rndv.readsInFlight()
	e.mu.Unlock()
	if !inFlight {
		t.Fatal("a send the peer has not read yet does not keep the notifiers armed")
	}
	if _, err := w.comms[1].Recv(make([]byte, 1<<20), 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(s); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	inFlight = e.rndv.readsInFlight()
	e.mu.Unlock()
	if inFlight {
		t.Fatal("the send completed and still keeps the notifiers armed")
	}
}

// Seed 001 §4.4: window round robin sends W consecutive small messages on
// one subchannel before moving to the next; round robin alternates.
func TestWindowRoundRobinSendsWMessagesPerSubchannel(t *testing.T) {
	for _, c := range []struct {
		mode   core.SchedMode
		window int
		want   string
	}{
		{core.SchedWindowRoundRobin, 3, "000111000111"},
		{core.SchedWindowRoundRobin, 1, "010101010101"},
		{core.SchedRoundRobin, 3, "010101010101"},
	} {
		p := &peer{subs: []*sub{{idx: 0}, {idx: 1}}}
		p.sched.n = 2
		p.sched.cfg = core.SchedSetup{Small: c.mode, Window: c.window}
		got := ""
		for range len(c.want) {
			got += fmt.Sprint(p.pickSmall().idx)
		}
		if got != c.want {
			t.Errorf("%v, W=%d: subchannels %s, want %s", c.mode, c.window, got, c.want)
		}
	}
}
