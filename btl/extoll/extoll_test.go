package extoll

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/btl/extoll/softnic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/gobtl/gobtl/pml"
	extolldynamic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
	extollstatic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_static"
	"github.com/gobtl/gobtl/policies/flowcontrol/none"
)

// kv is an in-process bootstrap store: the ranks of a test are goroutines.
type kv struct {
	mu   sync.Mutex
	vals map[string][]byte
}

func (s *kv) put(rank int, key string, v []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[fmt.Sprint(rank, "/", key)] = v
}

func (s *kv) get(ctx context.Context, rank int, key string) ([]byte, error) {
	for {
		s.mu.Lock()
		v, ok := s.vals[fmt.Sprint(rank, "/", key)]
		s.mu.Unlock()
		if ok {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

type policyFor func() core.FlowControl

var schemes = []struct {
	name    string
	policy  policyFor
	perPeer int
}{
	{"none with a huge mailbox", func() core.FlowControl { return none.Policy{} }, 4096},
	{"extoll_static", func() core.FlowControl { return &extollstatic.Policy{CreditSlots: 2} }, 20},
	{"extoll_dynamic", func() core.FlowControl { return &extolldynamic.Policy{CreditSlots: 2} }, 12},
}

// ranks opens n modules in this process and a pml communicator on each.
func ranks(t *testing.T, n, perPeer int, pol policyFor, mod func(*Config)) ([]*pml.Comm, []*Module) {
	t.Helper()
	store := &kv{vals: map[string][]byte{}}
	dir := t.TempDir()
	job := msgtest.JobID()
	key := core.NewJobKey()
	mods := make([]*Module, n)
	for r := range n {
		cfg := Config{
			Rank: r, Size: n, JobID: job, Slots: perPeer * n, Policy: pol(), Piggyback: true,
			Device: softnic.Config{
				Dir: dir, StallTimeout: 10 * time.Second, Key: key,
				Resolve: func(ctx context.Context, rank int) (softnic.Addr, error) {
					b, err := store.get(ctx, rank, "extoll")
					if err != nil {
						return softnic.Addr{}, err
					}
					return softnic.DecodeAddr(b)
				},
			},
		}
		if mod != nil {
			mod(&cfg)
		}
		m, addr, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		store.put(r, "extoll", addr.Encode())
		mods[r] = m
	}
	comms := make([]*pml.Comm, n)
	for r := range n {
		c, err := pml.New(r, n, []core.Module{mods[r]}, pml.Options{Metrics: core.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		comms[r] = c
	}
	t.Cleanup(func() { closeAll(comms) })
	return comms, mods
}

// closeAll closes the communicators together: Close finalizes, which is
// collective.
func closeAll(comms []*pml.Comm) {
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
}

// parallel runs f for every rank in its own goroutine and fails on the
// first error. With barrier, ranks end with a barrier. A send completes
// once the BTL has taken the frame, which may still wait in the VELO
// layer for credits, and a barrier's last messages are sends too: so, as
// a real program's finalize does, a rank that is done keeps progressing
// until every rank is.
func parallel(t *testing.T, comms []*pml.Comm, f func(c *pml.Comm) error, barrier bool) {
	t.Helper()
	errs := make(chan error, len(comms))
	var running atomic.Int64
	running.Store(int64(len(comms)))
	for _, c := range comms {
		go func() {
			err := f(c)
			if err == nil && barrier {
				err = c.Barrier()
			}
			running.Add(-1)
			if err != nil {
				for _, o := range comms {
					o.Abort(err) // the others would wait for this rank forever
				}
			}
			for err == nil && running.Load() > 0 {
				if c.Progress() == 0 {
					runtime.Gosched()
				}
			}
			errs <- err
		}()
	}
	for range comms {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// allPairs sends every rank a message of each size, all in flight at
// once, and checks what arrives.
func allPairs(c *pml.Comm, sizes []int) error {
	me, n := c.Rank(), c.Size()
	var reqs []*pml.Request
	recvs := map[[2]int][]byte{}
	for peer := range n {
		for i, sz := range sizes {
			buf := make([]byte, sz)
			recvs[[2]int{peer, i}] = buf
			r, err := c.Irecv(buf, peer, i)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	for peer := range n {
		for i, sz := range sizes {
			r, err := c.Isend(pattern(me, peer, i, sz), peer, i)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	if err := c.Waitall(reqs, nil); err != nil {
		return fmt.Errorf("rank %d: %w", me, err)
	}
	for k, buf := range recvs {
		if !bytes.Equal(buf, pattern(k[0], me, k[1], len(buf))) {
			return fmt.Errorf("rank %d: message %d from %d corrupt", me, k[1], k[0])
		}
	}
	return nil
}

// pattern is message i from src to dst, n bytes of the tests' payload.
func pattern(src, dst, i, n int) []byte {
	return msgtest.Fill(make([]byte, n), uint64(src)<<40|uint64(dst)<<20|uint64(i))
}

// Every rank sends to every rank messages of sizes across the eager and
// rendezvous ranges, many in flight; each arrives intact and in order.
func TestAllPairsExchangeUnderEachFlowControl(t *testing.T) {
	sizes := []int{0, 1, 16, 40, 41, 100, 1000, 2047, 2048, 2049, 10000, 100000}
	for _, s := range schemes {
		t.Run(s.name, func(t *testing.T) {
			const n = 4
			comms, mods := ranks(t, n, s.perPeer, s.policy, nil)
			parallel(t, comms, func(c *pml.Comm) error { return allPairs(c, sizes) }, true)
			_ = mods
		})
	}
}

// Many 2 KiB messages from all ranks to one, with a small mailbox: the
// credits hold senders back, the mailbox never blocks a sender, and
// nothing is lost.
func TestIncastWithASmallMailboxNeverBlocksTheNetwork(t *testing.T) {
	for _, s := range schemes[1:] {
		t.Run(s.name, func(t *testing.T) {
			const n, msgs = 4, 200
			comms, mods := ranks(t, n, s.perPeer, s.policy, nil)
			parallel(t, comms, func(c *pml.Comm) error {
				if c.Rank() == 0 {
					buf := make([]byte, 2048)
					for i := 0; i < (n-1)*msgs; i++ {
						st, err := c.Recv(buf, pml.AnySource, pml.AnyTag)
						if err != nil {
							return err
						}
						if !bytes.Equal(buf, pattern(st.Source, 0, st.Tag%256, 2048)) {
							return fmt.Errorf("message %d from %d corrupt", st.Tag, st.Source)
						}
					}
					return nil
				}
				for i := range msgs {
					if err := c.Send(pattern(c.Rank(), 0, i%256, 2048), 0, i); err != nil {
						return err
					}
				}
				return nil
			}, true)
			snap := metricsOf(mods[1])
			if snap["extoll.velo_blocked"] != 0 {
				t.Fatalf("a sender blocked on a full mailbox under %s", s.name)
			}
			if snap["extoll.fc.delayed_sends"] == 0 {
				t.Fatalf("no send waited for credits: the test did not stress the mailbox")
			}
		})
	}
}

func metricsOf(m *Module) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m.metrics.Snapshot() {
		if x, ok := v.(int64); ok {
			out[k] = x
		}
	}
	return out
}

// Without flow control, a fast sender and a receiver that does not look
// at its mailbox stall: the sender blocks in the "network" and, after the
// stall bound, its send fails with core.ErrStalled instead of hanging.
func TestNoFlowControlStallsAndReportsIt(t *testing.T) {
	comms, _ := ranks(t, 2, 8, func() core.FlowControl { return none.Policy{} }, func(c *Config) {
		c.Device.StallTimeout = 200 * time.Millisecond
	})
	msg := make([]byte, 2048)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		err = comms[0].Send(msg, 1, 0) // rank 1 never receives or progresses
	}
	if !errors.Is(err, core.ErrStalled) {
		t.Fatalf("want an error wrapping core.ErrStalled, got %v", err)
	}
	t.Logf("sender: %v", err)
}

// Ranks whose stacks disagree on flow control refuse to talk rather than
// overflow each other's mailboxes.
func TestMismatchedFlowControlIsRefused(t *testing.T) {
	comms, _ := ranks(t, 2, 20, schemes[1].policy, func(c *Config) {
		if c.Rank == 1 {
			c.Policy = &extolldynamic.Policy{CreditSlots: 2}
		}
	})
	err := comms[0].Send([]byte("x"), 1, 0)
	if err == nil || !strings.Contains(err.Error(), "same stack") {
		t.Fatalf("send between mismatched stacks: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	_, _, err := Open(Config{Rank: 0, Size: 4, Slots: 4 * 3, Policy: &extollstatic.Policy{CreditSlots: 2},
		Device: softnic.Config{Dir: t.TempDir(), Key: core.NewJobKey(), Resolve: func(context.Context, int) (softnic.Addr, error) { return softnic.Addr{}, nil }}})
	if err == nil {
		t.Fatal("opened a mailbox too small for Equation 2")
	}
	t.Log(err)
	comms, mods := ranks(t, 2, 20, schemes[1].policy, nil)
	_ = comms
	ep, err := mods[0].Endpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Send(core.Header{Type: core.TypeEager}, nil, make([]byte, 5000), 0); err == nil {
		t.Fatal("sent a frame above max_send_size")
	}
	if _, err := mods[0].Endpoint(7); !errors.Is(err, core.ErrUnreachable) {
		t.Fatalf("endpoint of rank 7 of 2: %v", err)
	}
}

// A corrupt train fails the connection it came on, never the process.
func TestCorruptTrainFailsTheConnection(t *testing.T) {
	_, mods := ranks(t, 2, 20, schemes[1].policy, nil)
	var lost []int
	mods[1].OnPeerLost(func(r int, err error) {
		if !errors.Is(err, core.ErrPeerLost) || !errors.Is(err, core.ErrBadFrame) {
			t.Errorf("lost with %v", err)
		}
		lost = append(lost, r)
	})
	// A continuation packet with no first packet.
	var s [1]nic.Slot
	s[0].SetHeader(10, tagMore, false)
	if err := mods[0].eng.Send(1, s[:]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(lost) == 0 && time.Now().Before(deadline) {
		mods[1].Progress()
	}
	if len(lost) != 1 || lost[0] != 0 {
		t.Fatalf("lost %v", lost)
	}
}

func TestEagerSendReceiveDoesNotAllocate(t *testing.T) {
	comms, _ := ranks(t, 2, 64, schemes[2].policy, nil)
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	round := func() {
		if err := comms[0].Send(msg, 0, 1); err != nil { // to itself through the mailbox
			t.Fatal(err)
		}
		if _, err := comms[0].Recv(buf, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 {
		round()
	}
	if a := testing.AllocsPerRun(500, round); a > 0 {
		t.Errorf("%.1f allocations per eager send and receive", a)
	}
	_ = rand.N[int]
}
