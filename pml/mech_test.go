package pml

import (
	"bytes"
	"testing"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
)

// The module's mechanism table, not the message size alone, picks RDMA or
// the pipeline: a message alone in its range goes by RDMA, one queued
// behind other rendezvous sends to the same peer by the pipeline, up to the
// rule's depth; and the count of rendezvous in flight drains, so that a
// message alone after a window goes by RDMA again.
func TestMechanismTableChoosesBySizeAndQueueDepth(t *testing.T) {
	const small, big, window = 6 << 10, 64 << 10, 8
	for _, tc := range []struct {
		name      string
		depth     int // RDMADepth of the big range
		wantRDMA  int // of the window's rendezvous sends
		wantAlone bool
	}{
		{"alone only", 0, 1, true},
		{"two others", 2, 3, true},
		{"never", core.NoRDMA, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mech := core.MechTable{{Max: 8 << 10, RDMADepth: core.NoRDMA}, {RDMADepth: tc.depth}}
			w := newWorld(t, 2, []inproc.RailOptions{{Mech: mech}}, Options{})
			counts := func(c *Comm) (rdma, pipe int64) {
				return c.Metrics().Counter("pml.rndv_sends").Load(), c.Metrics().Counter("pml.pipeline_sends").Load()
			}
			w.run(t, func(c *Comm) error {
				bufs := make([][]byte, window)
				for i := range bufs {
					bufs[i] = make([]byte, big)
				}
				if c.Rank() == 1 {
					for _, n := range []int{small, big} {
						if _, err := c.Recv(bufs[0][:n], 0, 0); err != nil {
							return err
						}
						if !bytes.Equal(bufs[0][:n], pattern(make([]byte, n), n)) {
							t.Errorf("%d bytes alone arrived corrupt", n)
						}
					}
					if err := recvWindow(t, c, bufs); err != nil {
						return err
					}
					_, err := c.Recv(bufs[0], 0, 2)
					return err
				}
				for _, n := range []int{small, big} {
					r0, p0 := counts(c)
					if err := c.Send(pattern(bufs[0][:n], n), 1, 0); err != nil {
						return err
					}
					r1, p1 := counts(c)
					rdma := n == big && tc.wantAlone
					if r1-r0 != b2i(rdma) || p1-p0 != b2i(!rdma) {
						t.Errorf("%d bytes alone: %d by RDMA, %d by the pipeline; want RDMA %v", n, r1-r0, p1-p0, rdma)
					}
				}
				r0, p0 := counts(c)
				if err := sendWindow(c, bufs); err != nil {
					return err
				}
				r1, p1 := counts(c)
				if r1-r0 != int64(tc.wantRDMA) || p1-p0 != int64(window-tc.wantRDMA) {
					t.Errorf("a window of %d: %d by RDMA, %d by the pipeline; want %d by RDMA", window, r1-r0, p1-p0, tc.wantRDMA)
				}
				// Alone again: the window's sends no longer count.
				if err := c.Send(bufs[0], 1, 2); err != nil {
					return err
				}
				if r2, _ := counts(c); r2-r1 != b2i(tc.wantAlone) {
					t.Errorf("a message alone after the window: %d by RDMA, want %d", r2-r1, b2i(tc.wantAlone))
				}
				return nil
			})
		})
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// fragCount wraps a module to watch the pipeline's fragments: their
// largest payload, and how many leave between two Progress calls, which it
// reports as in flight (core.Resources' FragsInFlight) — as if the
// receiver consumed them all at every poll. Its Replenished counts the
// Progress calls, at any of which the ring under it may have drained.
type fragCount struct {
	core.Module
	inflight, most, biggest int
	polls                   uint64
}

type fragCountEP struct {
	core.Endpoint
	w *fragCount
}

func (w *fragCount) Endpoint(rank int) (core.Endpoint, error) {
	ep, err := w.Module.Endpoint(rank)
	if err != nil {
		return nil, err
	}
	return &fragCountEP{ep, w}, nil
}

func (w *fragCount) Progress() int {
	w.inflight = 0
	w.polls++
	return w.Module.Progress()
}

func (e *fragCountEP) Send(h core.Header, pre, data []byte, flags core.SendFlags) error {
	err := e.Endpoint.Send(h, pre, data, flags)
	if err == nil && h.Type == core.TypeFrag {
		e.w.inflight++
		e.w.most = max(e.w.most, e.w.inflight)
		e.w.biggest = max(e.w.biggest, len(data))
	}
	return err
}

func (e *fragCountEP) FragsInFlight() int     { return e.w.inflight }
func (e *fragCountEP) Replenished() uint64    { return e.w.polls }
func (e *fragCountEP) PreferRendezvous() bool { return false }

// The pipeline cuts a message into the rule's fragments and keeps at most
// the rule's depth of them in flight; without a depth it sends as many as
// the module takes.
func TestMechanismRuleShapesThePipeline(t *testing.T) {
	const size = 256 << 10
	for _, tc := range []struct {
		name        string
		frag, depth int
		wantBiggest int // largest fragment payload
		wantMost    int // most fragments in flight; 0: more than 2
	}{
		{"module's fragments, no depth", 0, 0, 16<<10 - 64, 0},
		{"4 KiB fragments, depth 2", 4 << 10, 2, 4 << 10, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := inproc.New(2, nil)
			f.Rail("r", inproc.RailOptions{NoRDMA: true, MaxSendSize: 16 << 10,
				Mech: core.MechTable{{RDMADepth: core.NoRDMA, Frag: tc.frag, Depth: tc.depth}}})
			counts := make([]*fragCount, 2)
			w := &world{f: f}
			for r := range 2 {
				counts[r] = &fragCount{Module: f.Modules(r)[0]}
				c, err := New(r, 2, []core.Module{counts[r]}, Options{Metrics: core.NewMetrics()})
				if err != nil {
					t.Fatal(err)
				}
				w.comms = append(w.comms, c)
			}
			t.Cleanup(w.close)
			w.run(t, sendPattern(size, 7))
			got := counts[0]
			if got.biggest > tc.wantBiggest || got.biggest < tc.wantBiggest/2 {
				t.Errorf("largest fragment %d bytes, want about %d", got.biggest, tc.wantBiggest)
			}
			if tc.wantMost > 0 && got.most > tc.wantMost {
				t.Errorf("%d fragments in flight at once, want at most %d", got.most, tc.wantMost)
			}
			if tc.wantMost == 0 && got.most <= 2 {
				t.Errorf("only %d fragments in flight at once without a depth: the test cannot tell", got.most)
			}
		})
	}
}

// An exchange's message follows the module's exchange table, a one-way
// message of the same size the plain one: here the plain table reads by
// RDMA and the exchange table pipelines, and both ranks exchange a
// message each way by IsendExchange after one by Isend.
func TestExchangeTakesTheExchangeTable(t *testing.T) {
	const n = 64 << 10
	w := newWorld(t, 2, []inproc.RailOptions{{
		Mech:         core.MechTable{{RDMADepth: 65536}},
		MechExchange: core.MechTable{{RDMADepth: core.NoRDMA}},
	}}, Options{})
	w.run(t, func(c *Comm) error {
		peer := 1 - c.Rank()
		out, in := pattern(make([]byte, n), c.Rank()), make([]byte, n)
		for _, exchange := range []bool{false, true} {
			rdma0 := c.Metrics().Counter("pml.rndv_sends").Load()
			pipe0 := c.Metrics().Counter("pml.pipeline_sends").Load()
			r, err := c.Irecv(in, peer, 0)
			if err != nil {
				return err
			}
			var s *Request
			if exchange {
				s, err = c.IsendExchange(out, peer, 0)
			} else {
				s, err = c.Isend(out, peer, 0)
			}
			if err != nil {
				return err
			}
			if err := c.Waitall([]*Request{r, s}, nil); err != nil {
				return err
			}
			if !bytes.Equal(in, pattern(make([]byte, n), peer)) {
				t.Errorf("rank %d, exchange %v: the message arrived corrupt", c.Rank(), exchange)
			}
			rdma := c.Metrics().Counter("pml.rndv_sends").Load() - rdma0
			pipe := c.Metrics().Counter("pml.pipeline_sends").Load() - pipe0
			if want := b2i(!exchange); rdma != want || pipe != 1-want {
				t.Errorf("rank %d, exchange %v: %d by RDMA, %d by the pipeline", c.Rank(), exchange, rdma, pipe)
			}
		}
		return nil
	})
}

// recvWindow receives a window of messages tagged 1 from rank 0, posted
// at once, into bufs, and checks message i against pattern i.
func recvWindow(t *testing.T, c *Comm, bufs [][]byte) error {
	t.Helper()
	reqs := make([]*Request, len(bufs))
	for i := range reqs {
		var err error
		if reqs[i], err = c.Irecv(bufs[i], 0, 1); err != nil {
			return err
		}
	}
	if err := c.Waitall(reqs, nil); err != nil {
		return err
	}
	for i, b := range bufs {
		if !bytes.Equal(b, pattern(make([]byte, len(b)), i)) {
			t.Errorf("message %d of the window arrived corrupt", i)
		}
	}
	return nil
}

// sendWindow sends bufs to rank 1 with tag 1, message i filled with
// pattern i, all posted at once: recvWindow's other end.
func sendWindow(c *Comm, bufs [][]byte) error {
	reqs := make([]*Request, len(bufs))
	for i := range reqs {
		var err error
		if reqs[i], err = c.Isend(pattern(bufs[i], i), 1, 1); err != nil {
			return err
		}
	}
	return c.Waitall(reqs, nil)
}
