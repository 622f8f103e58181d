package pml

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
)

// gate wraps a module so that its endpoints take only `budget` more
// pipeline fragments and refuse the others (core.ErrNoResources), as sm
// does with every fragment in flight; it counts the fragments offered.
// With repl its endpoints tell when a refused fragment may pass
// (core.Resources' Replenished): when the test bumps gen.
type gate struct {
	core.Module
	repl          bool
	budget, tries int
	gen           uint64
}

type gateEP struct {
	core.Endpoint
	g *gate
}

type gateReplEP struct{ gateEP }

func (g *gate) Endpoint(rank int) (core.Endpoint, error) {
	ep, err := g.Module.Endpoint(rank)
	if err != nil {
		return nil, err
	}
	if g.repl {
		return &gateReplEP{gateEP{ep, g}}, nil
	}
	return &gateEP{ep, g}, nil
}

func (e *gateEP) Send(h core.Header, pre, data []byte, flags core.SendFlags) error {
	if h.Type != core.TypeFrag {
		return e.Endpoint.Send(h, pre, data, flags)
	}
	e.g.tries++
	if e.g.budget == 0 {
		return fmt.Errorf("gate: closed: %w", core.ErrNoResources)
	}
	e.g.budget--
	return e.Endpoint.Send(h, pre, data, flags)
}

// gateReplEP has the resources set: Replenished is the test's gen, and it
// runs no credits and counts no fragments.
func (e *gateReplEP) Replenished() uint64    { return e.g.gen }
func (e *gateReplEP) PreferRendezvous() bool { return false }
func (e *gateReplEP) FragsInFlight() int     { return 0 }

// pumpWorld is two ranks over one pipeline-only rail of 16 KiB fragments,
// rank 0's module behind g; both are driven from the test's goroutine.
func pumpWorld(t *testing.T, g *gate) *world {
	f := inproc.New(2, nil)
	f.Rail("r", inproc.RailOptions{NoRDMA: true, MaxSendSize: 16 << 10})
	w := &world{f: f}
	for r := range 2 {
		mod := f.Modules(r)[0]
		if r == 0 {
			g.Module = mod
			mod = g
		}
		c, err := New(r, 2, []core.Module{mod}, Options{Protocol: ProtoPipeline, Metrics: core.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		w.comms = append(w.comms, c)
	}
	t.Cleanup(w.close)
	return w
}

// A pipeline fragment the endpoint refused is offered again only once the
// endpoint says it has taken fragments back (core.Resources), not at
// every poll while the receiver copies; and the fragments that come back
// go to the send whose reply came first, in the order of the replies.
func TestARefusedFragmentWaitsForTheEndpointToReplenish(t *testing.T) {
	const n, sends, polls = 64 << 10, 3, 50
	g := &gate{repl: true}
	w := pumpWorld(t, g)
	c0, c1 := w.comms[0], w.comms[1]
	poll := func(k int) {
		for range k {
			c0.Progress()
			c1.Progress()
		}
	}
	bufs := make([][]byte, sends)
	recvs, isends := make([]*Request, sends), make([]*Request, sends)
	for i := range sends {
		bufs[i] = make([]byte, n)
		var err error
		if recvs[i], err = c1.Irecv(bufs[i], 0, 1); err != nil {
			t.Fatal(err)
		}
		if isends[i], err = c0.Isend(pattern(make([]byte, n), i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	poll(polls)
	if g.tries != 1 {
		t.Fatalf("%d fragments offered to a closed endpoint over %d polls with %d sends waiting, want 1", g.tries, polls, sends)
	}
	if a := testing.AllocsPerRun(100, func() { poll(1) }); a != 0 {
		t.Errorf("a poll with the pump blocked allocates %.2f times", a)
	}
	// Room, but the endpoint has not said so: nothing is offered.
	perMsg := (n + fragChunk(16<<10, n) - 1) / fragChunk(16<<10, n)
	g.budget = perMsg
	poll(polls)
	if g.tries != 1 {
		t.Fatalf("%d fragments offered before the endpoint replenished, want still 1", g.tries)
	}
	g.gen++
	poll(polls)
	if g.budget != 0 {
		t.Fatalf("%d of %d fragments still unused after the endpoint replenished", g.budget, perMsg)
	}
	for i, s := range isends {
		done, _, err := c0.Test(s)
		if err != nil {
			t.Fatal(err)
		}
		if done != (i == 0) {
			t.Errorf("send %d done %v after one message's fragments, want only the first send done", i, done)
		}
		if done {
			isends[i] = nil
		}
	}
	g.budget = 1 << 30
	g.gen++
	for range 1000 {
		poll(1)
		if ok, _ := c0.Testall(isends, nil); ok {
			break
		}
	}
	if ok, _ := c1.Testall(recvs, nil); !ok {
		t.Fatal("the receives did not complete")
	}
	for i, b := range bufs {
		if !bytes.Equal(b, pattern(make([]byte, n), i)) {
			t.Errorf("message %d arrived corrupt", i)
		}
	}
}

// An endpoint that cannot tell when it has room again is offered one
// fragment a poll, whatever the number of sends waiting behind it: the
// first refusal of a round stops the round.
func TestARefusedFragmentStopsTheRound(t *testing.T) {
	const n, sends, polls = 64 << 10, 4, 50
	g := &gate{}
	w := pumpWorld(t, g)
	c0, c1 := w.comms[0], w.comms[1]
	reqs := make([]*Request, 0, 2*sends)
	for range sends {
		r, err := c1.Irecv(make([]byte, n), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c0.Isend(make([]byte, n), 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r, s)
	}
	for range 5 { // every reply arrives
		c1.Progress()
		c0.Progress()
	}
	before := g.tries
	for range polls {
		c0.Progress()
	}
	if got := g.tries - before; got != polls {
		t.Errorf("%d fragments offered in %d polls with %d sends waiting, want one a poll", got, polls, sends)
	}
	g.budget = 1 << 30
	for range 1000 {
		c0.Progress()
		c1.Progress()
	}
	for _, r := range reqs {
		if !r.done {
			t.Fatal("the messages did not complete once the endpoint took fragments")
		}
	}
}
