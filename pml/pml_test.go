package pml

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
)

var oneRail = []inproc.RailOptions{{}}

// matchMsg is a message of TestMatching: its tag (AnyTag for a wildcard
// receive) and size.
type matchMsg struct {
	tag  int
	size int
}

// matchCase is a case of TestMatching: rank 1 sends sends to rank 0, in
// order; rank 0 posts recvs, in order, and each gets the tag in expect,
// truncated where trunc says.
type matchCase struct {
	name   string
	sends  []matchMsg
	recvs  []matchMsg
	expect []int
	trunc  []bool
}

func TestMatching(t *testing.T) {
	type msg = matchMsg
	tests := []matchCase{
		{"a specific tag skips earlier messages of other tags", []msg{{1, 8}, {2, 8}}, []msg{{2, 8}, {1, 8}}, []int{2, 1}, nil},
		{"AnyTag takes messages in send order", []msg{{5, 8}, {3, 8}, {9, 8}}, []msg{{AnyTag, 8}, {AnyTag, 8}, {AnyTag, 8}}, []int{5, 3, 9}, nil},
		{"same-tag messages never overtake, rendezvous then eager", []msg{{4, 64 << 10}, {4, 8}}, []msg{{4, 64 << 10}, {4, 64 << 10}}, []int{4, 4}, nil},
		{"same-tag messages never overtake, eager then rendezvous", []msg{{4, 8}, {4, 64 << 10}}, []msg{{4, 64 << 10}, {4, 64 << 10}}, []int{4, 4}, nil},
		{"a zero-byte message matches and completes", []msg{{7, 0}}, []msg{{7, 0}}, []int{7}, nil},
		{"a short buffer truncates an eager message", []msg{{1, 100}}, []msg{{1, 10}}, []int{1}, []bool{true}},
		{"a short buffer truncates a rendezvous message", []msg{{1, 200 << 10}}, []msg{{1, 100 << 10}}, []int{1}, []bool{true}},
		{"a buffer shorter than the inline part truncates", []msg{{1, 200 << 10}}, []msg{{1, 10}}, []int{1}, []bool{true}},
		{"a longer buffer takes a shorter message", []msg{{1, 10}}, []msg{{1, 100}}, []int{1}, []bool{false}},
	}
	for _, tc := range tests {
		for _, posted := range []bool{false, true} {
			name := tc.name + map[bool]string{false: " (unexpected)", true: " (posted first)"}[posted]
			t.Run(name, func(t *testing.T) {
				w := newWorld(t, 2, oneRail, Options{})
				ready := make(chan struct{})
				w.run(t, func(c *Comm) error {
					if c.Rank() == 1 {
						return tc.send(c, posted, ready)
					}
					return tc.receive(c, posted, ready)
				})
			})
		}
	}
}

// send is rank 1's part: when the receives are posted first, it waits
// for ready; otherwise its messages are on their way (unexpected) when
// the barrier lets rank 0 post.
func (tc *matchCase) send(c *Comm, posted bool, ready <-chan struct{}) error {
	if posted {
		<-ready
	}
	var reqs []*Request
	for i, m := range tc.sends {
		r, err := c.Isend(pattern(make([]byte, m.size), i), 0, m.tag)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	return c.Waitall(reqs, nil)
}

// receive is rank 0's part: it posts every receive, then checks what each
// got.
func (tc *matchCase) receive(c *Comm, posted bool, ready chan<- struct{}) error {
	if !posted {
		if err := c.Barrier(); err != nil {
			return err
		}
	}
	var reqs []*Request
	var bufs [][]byte
	for _, m := range tc.recvs {
		b := make([]byte, m.size)
		r, err := c.Irecv(b, 1, m.tag)
		if err != nil {
			return err
		}
		reqs, bufs = append(reqs, r), append(bufs, b)
	}
	if posted {
		close(ready)
	}
	consumed := map[int]bool{}
	for i, r := range reqs {
		st, err := c.Wait(r)
		if err := tc.check(i, st, err, bufs[i], consumed); err != nil {
			return err
		}
	}
	if posted {
		return c.Barrier()
	}
	return nil
}

// check checks receive i: its truncation, tag and source, and its
// content against the first send of its tag not yet consumed.
func (tc *matchCase) check(i int, st Status, err error, buf []byte, consumed map[int]bool) error {
	wantTrunc := tc.trunc != nil && tc.trunc[i]
	if wantTrunc != errors.Is(err, core.ErrTruncated) {
		return fmt.Errorf("receive %d: err %v, want truncation %v", i, err, wantTrunc)
	}
	if !wantTrunc && err != nil {
		return err
	}
	if st.Tag != tc.expect[i] || st.Source != 1 {
		return fmt.Errorf("receive %d got tag %d from %d, want tag %d", i, st.Tag, st.Source, tc.expect[i])
	}
	for j, m := range tc.sends {
		if m.tag == st.Tag && !consumed[j] {
			want := pattern(make([]byte, m.size), j)
			n := min(len(want), len(buf))
			if st.Count != n || !bytes.Equal(buf[:n], want[:n]) {
				return fmt.Errorf("receive %d: count %d, content mismatch against send %d", i, st.Count, j)
			}
			consumed[j] = true
			break
		}
	}
	return nil
}

func TestAnySourceAndSelf(t *testing.T) {
	w := newWorld(t, 3, oneRail, Options{})
	w.run(t, func(c *Comm) error {
		// Every rank sends to every rank, itself included.
		var reqs []*Request
		for d := 0; d < c.Size(); d++ {
			r, err := c.Isend(pattern(make([]byte, 100+d), c.Rank()), d, 3)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		seen := map[int]bool{}
		for i := 0; i < c.Size(); i++ {
			b := make([]byte, 200)
			st, err := c.Recv(b, AnySource, AnyTag)
			if err != nil {
				return err
			}
			if seen[st.Source] || st.Count != 100+c.Rank() || !bytes.Equal(b[:st.Count], pattern(make([]byte, st.Count), st.Source)) {
				return fmt.Errorf("bad receive %+v", st)
			}
			seen[st.Source] = true
		}
		return c.Waitall(reqs, nil)
	})
}

func TestDupIsolatesContexts(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	w.run(t, func(c *Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			if err := d.Send([]byte("dup"), 1, 0); err != nil {
				return err
			}
			return c.Send([]byte("world"), 1, 0)
		}
		b := make([]byte, 8)
		st, err := c.Recv(b, 0, AnyTag)
		if err != nil || string(b[:st.Count]) != "world" {
			return fmt.Errorf("world comm got %q, %v", b[:st.Count], err)
		}
		st, err = d.Recv(b, 0, AnyTag)
		if err != nil || string(b[:st.Count]) != "dup" {
			return fmt.Errorf("dup comm got %q, %v", b[:st.Count], err)
		}
		return nil
	})
}

func TestProbeWaitanyCancel(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	w.run(t, func(c *Comm) error {
		if c.Rank() == 1 {
			if err := c.Send(make([]byte, 300<<10), 0, 9); err != nil {
				return err
			}
			return c.Barrier()
		}
		st, err := c.Probe(AnySource, 9)
		if err != nil || st.Count != 300<<10 || st.Source != 1 {
			return fmt.Errorf("probe: %+v %v", st, err)
		}
		cancelMe, err := c.Irecv(make([]byte, 1), 1, 77)
		if err != nil {
			return err
		}
		r, err := c.Irecv(make([]byte, st.Count), 1, 9)
		if err != nil {
			return err
		}
		if err := c.Cancel(cancelMe); err != nil {
			return err
		}
		rs := []*Request{cancelMe, r}
		got := map[int]error{}
		for k := 0; k < 2; k++ {
			i, _, err := c.Waitany(rs)
			got[i] = err
		}
		if !errors.Is(got[0], core.ErrCanceled) || got[1] != nil {
			return fmt.Errorf("waitany: %v", got)
		}
		if i, _, _ := c.Waitany(rs); i != -1 {
			return fmt.Errorf("waitany on nils returned %d", i)
		}
		return c.Barrier()
	})
}

// protocolCases runs every protocol over one rail and over two rails that
// reorder frames, at sizes from 0 B to 16 MiB.
func TestProtocolsAllSizes(t *testing.T) {
	sizes := []int{0, 1, 4095, 4096, 4097, 16 << 10, 64<<10 + 3, 1 << 20, 16 << 20}
	if testing.Short() {
		sizes = sizes[:7]
	}
	railSets := map[string][]inproc.RailOptions{
		"one rail":               {{}},
		"two rails":              {{}, {}},
		"two rails, one no RDMA": {{}, {NoRDMA: true}},
		"small RDMA ops":         {{MaxRDMA: 100 << 10, MaxReads: 2}},
		"no inline rendezvous":   {{RndvEagerLimit: -1}},
		"tiny rings":             {{Slots: 2}},
	}
	for _, proto := range []Protocol{ProtoRead, ProtoWrite, ProtoReadAsync, ProtoPipeline} {
		for name, rails := range railSets {
			t.Run(fmt.Sprintf("%v over %s", proto, name), func(t *testing.T) {
				w := newWorld(t, 2, rails, Options{Protocol: proto})
				if len(rails) > 1 {
					w.f.Jitter(1, 200*time.Microsecond)
				}
				w.run(t, func(c *Comm) error { return exchange(c, sizes) })
			})
		}
	}
}

func TestPeerLostFailsRequests(t *testing.T) {
	for _, proto := range []Protocol{ProtoRead, ProtoWrite, ProtoPipeline} {
		t.Run(proto.String(), func(t *testing.T) {
			w := newWorld(t, 3, oneRail, Options{Protocol: proto, FinalizeTimeout: 100 * time.Millisecond})
			w.noFinalize = true // rank 2 cannot know that 0-1 broke
			// Rank 1 never sends; the link 0-1 drops while rank 0 waits on
			// a specific receive, an AnySource receive and a rendezvous send.
			w.run(t, func(c *Comm) error {
				switch c.Rank() {
				case 0:
					r1, _ := c.Irecv(make([]byte, 8), 1, 0)
					ra, _ := c.Irecv(make([]byte, 8), AnySource, 5)
					s, _ := c.Isend(make([]byte, 1<<20), 1, 0)
					if err := c.Send(nil, 2, 1); err != nil { // tell rank 2 we are waiting
						return err
					}
					for _, r := range []*Request{r1, ra, s} {
						if _, err := c.Wait(r); !errors.Is(err, core.ErrPeerLost) {
							return fmt.Errorf("request finished with %v, want ErrPeerLost", err)
						}
					}
					if err := c.Send(nil, 1, 0); !errors.Is(err, core.ErrPeerLost) {
						return fmt.Errorf("send to a lost peer: %v", err)
					}
					// Rank 2 still works.
					return c.Send([]byte("ok"), 2, 2)
				case 2:
					if _, err := c.Recv(nil, 0, 1); err != nil {
						return err
					}
					w.f.Drop(0, 0, 1)
					b := make([]byte, 2)
					_, err := c.Recv(b, 0, 2)
					return err
				}
				return nil
			})
		})
	}
}

func TestBadFrameFailsTheConnection(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	// A FIN naming no rendezvous, sent raw on rank 1's endpoint.
	ep, err := w.f.Module(1, 0).Endpoint(0)
	if err != nil {
		t.Fatal(err)
	}
	fin := make([]byte, finSize)
	encodeFin(fin, 12345, 1, finOK)
	if err := ep.Send(core.Header{Type: core.TypeRndvFin, Src: 1}, fin, nil, 0); err != nil {
		t.Fatal(err)
	}
	c := w.comms[0]
	r, _ := c.Irecv(make([]byte, 8), 1, 0)
	if _, err := c.Wait(r); !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("receive after a bad frame: %v", err)
	}
	if n := c.Metrics().Counter("pml.bad_frames").Load(); n != 1 {
		t.Fatalf("bad frames counted: %d", n)
	}
}

func TestReadAsyncProgressesWithoutCalls(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{Protocol: ProtoReadAsync})
	recvd := make(chan *Request)
	w.run(t, func(c *Comm) error {
		if c.Rank() == 0 {
			<-recvd // rank 1 has posted its receive and stopped calling in
			if err := c.Send(pattern(make([]byte, 1<<20), 1), 1, 0); err != nil {
				return err
			}
			return nil
		}
		b := make([]byte, 1<<20)
		r, err := c.Irecv(b, 0, 0)
		if err != nil {
			return err
		}
		recvd <- r
		// "Compute": make no calls into the library; the event thread must
		// match the START, read the data and send FIN on its own.
		deadline := time.Now().Add(20 * time.Second)
		for !c.done(r) {
			if time.Now().After(deadline) {
				return fmt.Errorf("receive did not progress without library calls")
			}
			time.Sleep(100 * time.Microsecond)
		}
		if _, err := c.Wait(r); err != nil {
			return err
		}
		if !bytes.Equal(b, pattern(make([]byte, 1<<20), 1)) {
			return fmt.Errorf("data corrupted")
		}
		return nil
	})
}

// done reports completion without making progress (tests only).
func (c *Comm) done(r *Request) bool {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return r.done
}

func TestInvalidArguments(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	c := w.comms[0]
	if _, err := c.Isend(nil, 2, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("send to rank 2 of 2: %v", err)
	}
	if _, err := c.Isend(nil, 1, -3); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative tag: %v", err)
	}
	if _, err := c.Irecv(nil, -7, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("receive from -7: %v", err)
	}
	r, _ := c.Isend(nil, 0, 0)
	rr, _ := c.Irecv(nil, 0, 0)
	c.Wait(r)
	c.Wait(rr)
	if _, err := c.Wait(r); !errors.Is(err, ErrInvalid) {
		t.Errorf("wait on a released request: %v", err)
	}
}

// TestEagerZeroAllocs pins the eager hot path: once the pools are warm,
// an 8-byte send and its receive allocate nothing, whether the receive
// was posted first or the message waited as unexpected, and whether or
// not a scheduling policy is configured.
func TestEagerZeroAllocs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rails  []inproc.RailOptions
		policy string // a scheduling policy, or none
	}{
		{"one rail", oneRail, ""},
		{"two rails and a scheduling policy", []inproc.RailOptions{{}, {}}, "round_robin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 2, tc.rails, Options{}, func(_ int, o *Options) {
				if tc.policy != "" {
					o.Scheduler = schedPolicy(t, tc.policy, nil)
				}
			})
			a, b := w.comms[0], w.comms[1]
			sbuf, rbuf := make([]byte, 8), make([]byte, 8)
			for _, path := range []struct {
				name string
				step func()
			}{
				{"posted", func() {
					r, _ := b.Irecv(rbuf, 0, 1)
					s, _ := a.Isend(sbuf, 1, 1)
					a.Wait(s)
					b.Wait(r)
				}},
				{"unexpected", func() {
					s, _ := a.Isend(sbuf, 1, 2)
					a.Wait(s)
					b.Progress()
					r, _ := b.Irecv(rbuf, 0, 2)
					b.Wait(r)
				}},
			} {
				for i := 0; i < 100; i++ {
					path.step()
				}
				if n := testing.AllocsPerRun(1000, path.step); n != 0 {
					t.Errorf("eager send and %s receive allocate %.1f times", path.name, n)
				}
			}
		})
	}
}

func TestStallTimeoutReportsInsteadOfHanging(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{StallTimeout: 50 * time.Millisecond, Backoff: Backoff{Spin: 10, Yield: 10, Sleep: time.Millisecond, MaxSleep: time.Millisecond}})
	c := w.comms[0]
	r, err := c.Irecv(make([]byte, 8), 1, 0) // rank 1 never sends
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(r); !errors.Is(err, core.ErrStalled) {
		t.Fatalf("wait: %v, want ErrStalled", err)
	}
	// The request is still pending: a late message completes it.
	if err := w.comms[1].Send([]byte("late"), 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(r); err != nil {
		t.Fatalf("second wait: %v", err)
	}
}

// A pipelined send that fails while it waits on the pump list, and is
// waited for and released at once, is not recycled until the pump lets go
// of it: a receive that took its slot would otherwise be pumped as if it
// were the send.
func TestAFailedPipelineSendIsNotRecycledWhilePumped(t *testing.T) {
	w := newWorld(t, 2, []inproc.RailOptions{{Slots: 4}}, Options{Protocol: ProtoPipeline, RndvEagerLimit: -1, FinalizeTimeout: 100 * time.Millisecond})
	a, b := w.comms[0], w.comms[1]
	r, _ := b.Irecv(make([]byte, 1<<20), 0, 0)
	s, _ := a.Isend(make([]byte, 1<<20), 1, 0)
	b.Progress() // the START: rank 1 replies
	a.Progress() // the REPLY: rank 0 pumps until the 4-slot ring is full
	a.e.mu.Lock()
	pumping := !a.e.rndv.pumps.Empty()
	a.e.mu.Unlock()
	if !pumping {
		t.Fatal("the send is not waiting on the pump list; the test needs a full ring")
	}
	w.f.Drop(0, 0, 1)
	// The eager send meets the dead link and fails the peer, and with it
	// the pipelined send.
	eager, _ := a.Isend(make([]byte, 8), 1, 1)
	if _, err := a.Wait(s); !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("pipelined send to a lost peer: %v, want ErrPeerLost", err)
	}
	a.AckFailed()                                     // else the wildcard fails at once (ULFM)
	wild, _ := a.Irecv(make([]byte, 8), AnySource, 9) // takes the freed slot
	a.Progress()
	if a.done(wild) {
		t.Fatal("a receive from AnySource completed with nothing sent")
	}
	a.e.mu.Lock()
	pending := a.e.pendingWork
	a.e.mu.Unlock()
	if pending != 0 {
		t.Fatalf("%d units of work still pending after the pump let go of the failed send", pending)
	}
	if _, err := a.Wait(eager); !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("eager send to the lost peer: %v, want ErrPeerLost", err)
	}
	if _, err := b.Wait(r); !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("receive from the lost peer: %v, want ErrPeerLost", err)
	}
	if err := a.Cancel(wild); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(wild); !errors.Is(err, core.ErrCanceled) {
		t.Fatalf("canceled receive: %v, want ErrCanceled", err)
	}
}

// Frames that arrive ahead of their sequence number wait in the
// out-of-order queue (seed 001 §5.2); once the pools are warm that costs
// no allocation either. The frames are handed to the engine directly, one
// early and one in order, as two rails that reorder would.
func TestOutOfOrderArrivalsAllocateNothing(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	b := w.comms[1]
	e, payload, rbuf := b.e, make([]byte, 8), make([]byte, 8)
	step := func() {
		r1, _ := b.Irecv(rbuf, 0, 1)
		r2, _ := b.Irecv(rbuf, 0, 1)
		e.mu.Lock()
		h := core.Header{Type: core.TypeEager, Src: 0, Tag: 1, PSN: e.chans.get(0).expected() + 1}
		e.onMatchable(&h, payload) // early: waits
		h.PSN--
		e.onMatchable(&h, payload) // in order: delivers both
		e.mu.Unlock()
		b.Wait(r1)
		b.Wait(r2)
	}
	for i := 0; i < 100; i++ {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("an out-of-order eager receive allocates %.1f times", n)
	}
	if n := b.Metrics().Counter("pml.out_of_order").Load(); n != 100+1+1000 { // AllocsPerRun runs step once more before it counts
		t.Fatalf("%d out-of-order arrivals counted, want 1101 (one per step)", n)
	}
	// Rank 0 "sent" those frames: its sequence numbers must agree with
	// rank 1's for the collective Close.
	a := w.comms[0].e
	a.mu.Lock()
	e.mu.Lock()
	a.chans.get(1).psn = e.chans.get(0).expected()
	e.mu.Unlock()
	a.mu.Unlock()
}

func TestFragChunkFillsFragmentsOfLongMessages(t *testing.T) {
	for _, tc := range []struct{ maxSend, total, want int }{
		{32 << 10, 64 << 10, 16 << 10},                 // medium: power of two, several in flight
		{32 << 10, 8 * (32<<10 - fragFixed), 16 << 10}, // at the bound: still a power of two
		{32 << 10, 1 << 20, 32<<10 - 64},               // long: whole fragments, cache-line multiple
		{64 << 10, 4 << 20, 64<<10 - 64},
		{100, 1 << 20, 64}, // tiny fragments: the power of two is larger
	} {
		if got := fragChunk(tc.maxSend, tc.total); got != tc.want {
			t.Errorf("fragChunk(%d, %d) = %d, want %d", tc.maxSend, tc.total, got, tc.want)
		}
	}
}

// TestAWildcardFailsUntilTheLossIsAcknowledged is ULFM's rule: once a
// peer is lost, receives and probes from AnySource fail with
// ErrPeerLost — on every communicator, until that communicator
// acknowledges the loss — and then match the live peers, while receives
// naming the lost peer still fail. No wildcard can wait forever on a
// peer that is gone.
func TestAWildcardFailsUntilTheLossIsAcknowledged(t *testing.T) {
	w := newWorld(t, 3, oneRail, Options{FinalizeTimeout: 100 * time.Millisecond})
	w.noFinalize = true
	w.run(t, func(c *Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		switch c.Rank() {
		case 0:
			return wildcardsAfterALoss(w, c, d)
		case 2:
			if _, err := c.Recv(nil, 0, 1); err != nil {
				return err
			}
			if err := c.Send([]byte("alive"), 0, 3); err != nil {
				return err
			}
			if err := c.Send(nil, 0, 2); err != nil {
				return err
			}
			return d.Send([]byte("again"), 0, 4)
		}
		return nil
	})
}

// wildcardsAfterALoss is rank 0's part of
// TestAWildcardFailsUntilTheLossIsAcknowledged (d is c's duplicate): it
// loses rank 1, and with rank 2's message here, checks that c's
// wildcards fail until c acknowledges, then match, and that d's fail
// until d acknowledges.
func wildcardsAfterALoss(w *world, c, d *Comm) error {
	r, _ := c.Irecv(make([]byte, 8), 1, 0)
	w.f.Drop(0, 0, 1)
	if _, err := c.Wait(r); !errors.Is(err, core.ErrPeerLost) {
		return fmt.Errorf("receive from the dropped peer: %v", err)
	}
	// Rank 2's message is on its way, or here: the wildcard fails all the
	// same until the loss is acknowledged.
	if err := c.Send(nil, 2, 1); err != nil {
		return err
	}
	if _, err := c.Recv(nil, 2, 2); err != nil { // rank 2 has sent
		return err
	}
	if err := failsWithPeerLost(wildcardCalls(c)); err != nil {
		return err
	}
	if got := c.AckFailed(); len(got) != 1 || got[0] != 1 {
		return fmt.Errorf("AckFailed acknowledged %v, want [1]", got)
	}
	ok, st, err := c.Iprobe(AnySource, 3)
	if err != nil || !ok || st.Source != 2 {
		return fmt.Errorf("Iprobe(AnySource) after the acknowledgement: %v %+v %v, want rank 2's message", ok, st, err)
	}
	b := make([]byte, 5)
	if st, err := c.Recv(b, AnySource, 3); err != nil || st.Source != 2 || string(b) != "alive" {
		return fmt.Errorf("Recv(AnySource) after the acknowledgement: %+v %v %q", st, err, b)
	}
	err = failsWithPeerLost(map[string]func() error{
		"a receive from the lost rank": func() error { _, err := c.Recv(nil, 1, AnyTag); return err },
		// The duplicate has not acknowledged: its wildcards still fail.
		"the duplicate's Iprobe(AnySource)": func() error { _, _, err := d.Iprobe(AnySource, AnyTag); return err },
	})
	if err != nil {
		return err
	}
	d.AckFailed()
	if _, err := d.Recv(b, AnySource, 4); err != nil || string(b) != "again" {
		return fmt.Errorf("the duplicate's Recv(AnySource) after its acknowledgement: %v %q", err, b)
	}
	return nil
}

// wildcardCalls are c's receives and probes from AnySource, by name.
func wildcardCalls(c *Comm) map[string]func() error {
	return map[string]func() error{
		"Irecv(AnySource)": func() error {
			r, err := c.Irecv(make([]byte, 5), AnySource, 3)
			if err == nil {
				_, err = c.Wait(r)
			}
			return err
		},
		"Recv(AnySource)":   func() error { _, err := c.Recv(make([]byte, 5), AnySource, AnyTag); return err },
		"Iprobe(AnySource)": func() error { _, _, err := c.Iprobe(AnySource, AnyTag); return err },
		"Probe(AnySource)":  func() error { _, err := c.Probe(AnySource, 3); return err },
	}
}

// failsWithPeerLost runs calls that must fail with ErrPeerLost.
func failsWithPeerLost(calls map[string]func() error) error {
	for what, call := range calls {
		if err := call(); !errors.Is(err, core.ErrPeerLost) {
			return fmt.Errorf("%s after the loss: %v, want ErrPeerLost", what, err)
		}
	}
	return nil
}

// A loss outside a communicator concerns none of its wildcards: on a
// communicator of ranks 0 and 2, made before rank 1 is lost, AnySource
// receives match at once and AckFailed has nothing to acknowledge, while
// the whole job's wildcards still fail until the loss is acknowledged.
func TestALossOutsideACommunicatorConcernsNoWildcardOfIt(t *testing.T) {
	w := newWorld(t, 3, oneRail, Options{FinalizeTimeout: 100 * time.Millisecond})
	w.noFinalize = true
	w.run(t, func(c *Comm) error {
		if c.Rank() == 1 {
			return nil
		}
		s, err := c.Derive(c.NextContext(), []int{0, 2})
		if err != nil {
			return err
		}
		if c.Rank() == 2 {
			if _, err := s.Recv(nil, 0, 1); err != nil {
				return err
			}
			return s.Send([]byte("alive"), 0, 2)
		}
		r, _ := c.Irecv(make([]byte, 8), 1, 0)
		w.f.Drop(0, 0, 1)
		if _, err := c.Wait(r); !errors.Is(err, core.ErrPeerLost) {
			return fmt.Errorf("receive from the dropped peer: %v", err)
		}
		if _, _, err := c.Iprobe(AnySource, AnyTag); !errors.Is(err, core.ErrPeerLost) {
			return fmt.Errorf("the job's Iprobe(AnySource) after the loss: %v, want ErrPeerLost", err)
		}
		if err := s.Send(nil, 1, 1); err != nil {
			return err
		}
		b := make([]byte, 5)
		if st, err := s.Recv(b, AnySource, 2); err != nil || st.Source != 1 || string(b) != "alive" {
			return fmt.Errorf("Recv(AnySource) on the communicator without the lost rank: %+v %v %q", st, err, b)
		}
		if got := s.AckFailed(); len(got) != 0 {
			return fmt.Errorf("AckFailed on the communicator without the lost rank acknowledged %v", got)
		}
		return nil
	})
}

// An Irecv from a lost peer fails at once also behind a receive posted
// earlier (Irecv's inline case for a window must not post it, where it
// would wait for ever).
func TestAnIrecvBehindAPostedReceiveFailsForALostPeer(t *testing.T) {
	w := newWorld(t, 3, oneRail, Options{FinalizeTimeout: 100 * time.Millisecond})
	w.noFinalize = true
	w.run(t, func(c *Comm) error {
		switch c.Rank() {
		case 0:
			lost, _ := c.Irecv(make([]byte, 8), 1, 0)
			from2, _ := c.Irecv(make([]byte, 8), 2, 7)
			if err := c.Send(nil, 2, 1); err != nil { // tell rank 2 to drop 0-1
				return err
			}
			if _, err := c.Wait(lost); !errors.Is(err, core.ErrPeerLost) {
				return fmt.Errorf("receive from the lost peer: %v, want ErrPeerLost", err)
			}
			r, _ := c.Irecv(make([]byte, 8), 1, 0) // behind from2
			if ok, _, err := c.Test(r); !ok || !errors.Is(err, core.ErrPeerLost) {
				return fmt.Errorf("Irecv from the lost peer behind a posted receive: done %v, %v; want done, ErrPeerLost", ok, err)
			}
			if err := c.Send(nil, 2, 2); err != nil { // rank 2 may send now
				return err
			}
			_, err := c.Wait(from2)
			return err
		case 2:
			if _, err := c.Recv(nil, 0, 1); err != nil {
				return err
			}
			w.f.Drop(0, 0, 1)
			if _, err := c.Recv(nil, 0, 2); err != nil {
				return err
			}
			return c.Send([]byte("ok"), 0, 7)
		}
		return nil
	})
}
