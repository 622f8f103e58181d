package pml

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
)

// scripted is a core.MechChooser whose choices a test dictates, message
// by message, and which records what the PML tells it.
type scripted struct {
	mu     sync.Mutex
	script []bool // choices in order; past its end, the last one
	asked  []int  // sizes ChooseRDMA was asked about
	done   []doneCall
}

type doneCall struct {
	size int
	rdma bool
	d    time.Duration
}

func (s *scripted) ChooseRDMA(size int, _ time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, size)
	i := min(len(s.asked), len(s.script)) - 1
	return s.script[i]
}

func (s *scripted) MechDone(size int, rdma bool, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = append(s.done, doneCall{size, rdma, d})
}

// choosing is an inproc module whose endpoints choose as their rank's
// chooser says.
type choosing struct {
	*inproc.Module
	c *scripted
}

type choosingEP struct {
	core.Endpoint
	core.RDMA
	*scripted
}

func (m *choosing) Endpoint(rank int) (core.Endpoint, error) {
	ep, err := m.Module.Endpoint(rank)
	if err != nil {
		return nil, err
	}
	return &choosingEP{ep, ep.(core.RDMA), m.c}, nil
}

// chooseWorld is two ranks over one inproc rail with table mech, each
// rank's endpoints choosing by its own script.
func chooseWorld(t *testing.T, mech core.MechTable, scripts [2][]bool) (*world, [2]*scripted) {
	t.Helper()
	f := inproc.New(2, nil)
	f.Rail("r", inproc.RailOptions{Mech: mech})
	w := &world{f: f}
	var cs [2]*scripted
	for r := range 2 {
		cs[r] = &scripted{script: scripts[r]}
		m := &choosing{f.Modules(r)[0].(*inproc.Module), cs[r]}
		c, err := New(r, 2, []core.Module{m}, Options{Metrics: core.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		w.comms = append(w.comms, c)
	}
	t.Cleanup(w.close)
	return w, cs
}

// mechCounts are the sender's messages by RDMA and by the pipeline, and
// the offers of RDMA the receiver turned down.
func mechCounts(c *Comm) (rdma, pipe, declined int64) {
	m := c.Metrics()
	return m.Counter("pml.rndv_sends").Load(), m.Counter("pml.pipeline_sends").Load(), m.Counter("pml.rdma_declined").Load()
}

var chooseTable = core.MechTable{{Max: 8 << 10, RDMADepth: core.NoRDMA}, {RDMADepth: 0, Choose: true}}

// The receiver's endpoint chooses, message by message, and both ends agree
// on what each message used: the sender counts it by the mechanism the
// receiver chose (a REPLY without keys turned its rdma_read offer into a
// pipeline), the data arrive whole either way, and the receiver's chooser
// hears how long each took by the mechanism it chose.
func TestTheReceiverChoosesAndTheSenderFollows(t *testing.T) {
	const n = 64 << 10
	script := []bool{true, false, false, true, false, true, true, false}
	w, cs := chooseWorld(t, chooseTable, [2][]bool{{true}, script})
	w.run(t, func(c *Comm) error {
		buf := make([]byte, n)
		for i, want := range script {
			if c.Rank() == 1 {
				if _, err := c.Recv(buf, 0, 0); err != nil {
					return err
				}
				if !bytes.Equal(buf, pattern(make([]byte, n), i)) {
					t.Errorf("message %d (RDMA %v) arrived corrupt", i, want)
				}
				continue
			}
			r0, p0, d0 := mechCounts(c)
			if err := c.Send(pattern(buf, i), 1, 0); err != nil {
				return err
			}
			r1, p1, d1 := mechCounts(c)
			if r1-r0 != b2i(want) || p1-p0 != b2i(!want) || d1-d0 != b2i(!want) {
				t.Errorf("message %d: %d by RDMA, %d by the pipeline, %d declined; the receiver chose RDMA %v", i, r1-r0, p1-p0, d1-d0, want)
			}
		}
		return nil
	})
	got := cs[1]
	if len(got.asked) != len(script) || len(got.done) != len(script) {
		t.Fatalf("the receiver was asked %d times and told %d times, want %d each", len(got.asked), len(got.done), len(script))
	}
	for i, d := range got.done {
		if got.asked[i] != n || d.size != n || d.rdma != script[i] || d.d <= 0 {
			t.Errorf("message %d: asked about %d bytes, told %+v; want %d bytes by RDMA %v in a positive time", i, got.asked[i], d, n, script[i])
		}
	}
	if len(cs[0].asked) != 0 {
		t.Errorf("the sender's endpoint was asked %d times; only a receiver chooses", len(cs[0].asked))
	}
}

// The choice never goes beyond the table: a receiver that would always
// read is not asked about a size the table keeps on the pipeline, nor
// about a message queued behind others to the same peer beyond the rule's
// depth, and none of those moves by RDMA; nor is it asked where the
// rule lets RDMA alone decide (Choose false).
func TestTheChoiceStaysWithinTheTable(t *testing.T) {
	const small, big, window = 6 << 10, 64 << 10, 8
	for _, tc := range []struct {
		name             string
		mech             core.MechTable
		wantAsked        int // of the small message alone, then the window
		wantRDMA, wantPP int64
	}{
		// The window's first message goes alone, the others behind it.
		{"choose", chooseTable, 1, 1, 1 + window - 1},
		{"fixed", core.MechTable{{Max: 8 << 10, RDMADepth: core.NoRDMA}, {RDMADepth: 0}}, 0, 1, 1 + window - 1},
		{"never", core.MechTable{{RDMADepth: core.NoRDMA, Choose: true}}, 0, 0, 1 + window},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, cs := chooseWorld(t, tc.mech, [2][]bool{{true}, {true}})
			w.run(t, func(c *Comm) error {
				bufs := make([][]byte, window)
				for i := range bufs {
					bufs[i] = make([]byte, big)
				}
				if c.Rank() == 1 {
					if _, err := c.Recv(bufs[0][:small], 0, 0); err != nil {
						return err
					}
					return recvWindow(t, c, bufs)
				}
				if err := c.Send(bufs[0][:small], 1, 0); err != nil {
					return err
				}
				if err := sendWindow(c, bufs); err != nil {
					return err
				}
				if r, p, _ := mechCounts(c); r != tc.wantRDMA || p != tc.wantPP {
					t.Errorf("%d by RDMA, %d by the pipeline; want %d and %d", r, p, tc.wantRDMA, tc.wantPP)
				}
				return nil
			})
			if got := len(cs[1].asked); got != tc.wantAsked {
				t.Errorf("the receiver was asked %d times (sizes %v), want %d", got, cs[1].asked, tc.wantAsked)
			}
		})
	}
}

// Eager messages never meet the choice: no question, no report, so no
// clock read (the PML reads it only around a question).
func TestEagerMessagesAreNotChosenFor(t *testing.T) {
	w, cs := chooseWorld(t, chooseTable, [2][]bool{{true}, {true}})
	w.run(t, func(c *Comm) error {
		for _, n := range []int{8, 2 << 10, 4 << 10} {
			buf := make([]byte, n)
			for i := range 100 {
				var err error
				if c.Rank() == 0 {
					err = c.Send(pattern(buf, i), 1, 0)
				} else {
					_, err = c.Recv(buf, 0, 0)
				}
				if err != nil {
					return fmt.Errorf("%d bytes: %w", n, err)
				}
			}
		}
		return nil
	})
	for r, c := range cs {
		if len(c.asked) != 0 || len(c.done) != 0 {
			t.Errorf("rank %d's chooser was asked %d times and told %d times about eager messages", r, len(c.asked), len(c.done))
		}
	}
}
