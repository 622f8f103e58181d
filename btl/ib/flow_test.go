package ib

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/flowcontrol/ib_dynamic"
	"github.com/gobtl/gobtl/policies/flowcontrol/ib_hardware"
	"github.com/gobtl/gobtl/policies/flowcontrol/ib_static"
	"github.com/gobtl/gobtl/policies/recvbuf"
	"github.com/gobtl/gobtl/policies/recvbuf/perpeer"
)

// The flow-control tests drive two or three ranks of the BTL directly.
// A stream stands in for the PML: frames refused with ErrNoResources wait
// in its FIFO and are retried, head first, after Progress — the backlog of
// seed 000 §4.2 as the PML keeps it.

// perPeerLayout is a receive layout of per-peer queues only.
func perPeerLayout(t tb, queues string) func() core.RecvBuffers {
	return layout(t, perpeer.New, perpeer.Params, "receive_queues", queues)
}

// fcOpts opens a job on a per-peer layout with a flow-control policy; the
// eager limit is what the largest buffer holds.
func fcOpts(t tb, layout string, flow func() core.FlowControl) jobOpts {
	qs, err := recvbuf.ParseReceiveQueues(layout)
	if err != nil {
		t.Fatal(err)
	}
	eager := fmt.Sprint(qs[len(qs)-1].BufSize - core.HeaderSize)
	return jobOpts{policy: perPeerLayout(t, layout), flow: flow, params: map[string]string{"eager_limit": eager}}
}

func staticFlow(pre, threshold int, rndv bool) func() core.FlowControl {
	return func() core.FlowControl { return &ibstatic.Policy{PrePost: pre, Threshold: threshold, Rndv: rndv} }
}

func hardwareFlow(pre int) func() core.FlowControl {
	return func() core.FlowControl { return &ibhardware.Policy{PrePost: pre, RNRRetry: 7} }
}

// stream is one direction's traffic: frames numbered from 0, tag = number.
type stream struct {
	j        *job
	from, to int
	sizes    []int // per frame
	queued   int   // frames handed over so far (sent or waiting)
	accepted int   // frames the BTL took, in order
	// waited[i]: frame i went through the backlog — refused, or handed
	// over while an earlier one waited — and goes with core.SendBacklog,
	// as the PML sends from its queue.
	waited []bool
}

func (s *stream) payload(i int) []byte { return fill(make([]byte, s.sizes[i]), s.from*100000+i) }

// add hands n more frames of the given size to the stream.
func (s *stream) add(n, size int) {
	for range n {
		s.sizes = append(s.sizes, size)
		s.waited = append(s.waited, s.accepted < s.queued)
	}
	s.queued += n
	s.retry()
}

// retry offers waiting frames in order until one is refused.
func (s *stream) retry() {
	e := s.j.ep(s.from, s.to)
	for s.accepted < s.queued {
		i := s.accepted
		var flags core.SendFlags
		if s.waited[i] {
			flags = core.SendBacklog
		}
		err := e.Send(core.Header{Type: testType, Src: int32(s.from), Tag: int32(i)}, nil, s.payload(i), flags)
		if errors.Is(err, core.ErrNoResources) {
			for k := i; k < s.queued; k++ {
				s.waited[k] = true
			}
			return
		}
		if err != nil {
			s.j.t.Fatalf("send %d→%d frame %d: %v", s.from, s.to, i, err)
		}
		s.accepted++
	}
}

// check verifies that the receiver got exactly the stream's frames,
// intact, in order per receive queue: frames of different sizes travel
// different QPs and may overtake each other (the PML puts them back in
// order by PSN).
func (s *stream) check() {
	j := s.j
	j.t.Helper()
	var got []frame
	for _, f := range j.got[s.to] {
		if int(f.h.Src) == s.from {
			got = append(got, f)
		}
	}
	if len(got) != len(s.sizes) {
		j.t.Fatalf("%d→%d: %d frames arrived, %d sent", s.from, s.to, len(got), len(s.sizes))
	}
	m := j.mods[s.from]
	seen := make([]bool, len(s.sizes))
	last := make([]int, len(m.rx.queues))
	for i := range last {
		last[i] = -1
	}
	for _, f := range got {
		i := int(f.h.Tag)
		if i < 0 || i >= len(s.sizes) || seen[i] || !bytes.Equal(f.p, s.payload(i)) {
			j.t.Fatalf("%d→%d: frame %d (%d bytes) duplicated or damaged", s.from, s.to, i, len(f.p))
		}
		seen[i] = true
		q := m.tx.queueFor(core.HeaderSize + s.sizes[i])
		if i < last[q] {
			j.t.Fatalf("%d→%d: frame %d arrived after frame %d on queue %d", s.from, s.to, i, last[q], q)
		}
		last[q] = i
	}
}

// books checks the credit invariant of one direction on every per-peer
// queue: the sender's credits plus what the receiver owes never exceed the
// buffers the receiver has posted — frames and credits in flight only make
// the sum smaller — and equal them once everything has landed.
func (j *job) books(from, to int, exact bool) error {
	tx, rx := j.ep(from, to), j.ep(to, from)
	if tx.state != epConnected || rx.state != epConnected {
		return nil
	}
	for i, q := range j.mods[to].rx.queues {
		if q.shared {
			continue
		}
		s, r := tx.cred[i], rx.cred[i]
		if s.avail+r.owed > r.posted || exact && s.avail+r.owed != r.posted {
			return fmt.Errorf("%d→%d queue %d: credits %d + owed %d vs %d posted", from, to, i, s.avail, r.owed, r.posted)
		}
		if r.posted < q.count || r.posted > q.maxPosted {
			return fmt.Errorf("%d→%d queue %d: %d posted outside [%d, %d]", from, to, i, r.posted, q.count, q.maxPosted)
		}
	}
	return nil
}

// perPeerRNR is the RNR NAKs rank from's per-peer QPs to rank to
// received, and the explicit credit frames it sent there.
func (j *job) perPeerRNR(from, to int) (rnr, creditFrames int64) {
	e := j.ep(from, to)
	for i, q := range j.mods[from].rx.queues {
		if !q.shared && e.qps != nil {
			rnr += rnrNaks(e.qps[i : i+1])
		}
	}
	return rnr, e.st.creditMsgs.Load()
}

func TestFlowControlKeepsEveryMessageAndNeverOverrunsAReceiver(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		layout := rapid.SampledFrom([]string{"P,256,4,1,1", "P,128,4,1,1:P,1024,4,1,1"}).Draw(rt, "layout")
		pre := rapid.IntRange(1, 4).Draw(rt, "pre_post")
		threshold := rapid.IntRange(1, 6).Draw(rt, "threshold")
		var pols []*ibdynamic.Policy
		flow := staticFlow(pre, threshold, false)
		if rapid.Bool().Draw(rt, "dynamic") {
			max := pre + rapid.IntRange(0, 6).Draw(rt, "growth room")
			flow = func() core.FlowControl {
				p := &ibdynamic.Policy{Initial: pre, Max: max, Step: 1, Threshold: threshold, Exponential: rapid.Bool().Draw(rt, "exponential")}
				pols = append(pols, p)
				return p
			}
		}
		j := openJob(t, 2, fcOpts(rt, layout, flow))
		defer j.close()
		j.t = rt
		ab, ba := &stream{j: j, from: 0, to: 1}, &stream{j: j, from: 1, to: 0}
		maxSize := j.mods[0].attrs.MaxSendSize
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			// Either side sends a burst, or progresses (and retries what
			// waits); a side that is not picked stalls.
			switch rapid.IntRange(0, 3).Draw(rt, "action") {
			case 0:
				ab.add(rapid.IntRange(1, 8).Draw(rt, "n"), rapid.IntRange(0, maxSize).Draw(rt, "size"))
			case 1:
				ba.add(rapid.IntRange(1, 8).Draw(rt, "n"), rapid.IntRange(0, maxSize).Draw(rt, "size"))
			case 2:
				j.mods[0].Progress()
				ab.retry()
			case 3:
				j.mods[1].Progress()
				ba.retry()
			}
			for _, d := range [][2]int{{0, 1}, {1, 0}} {
				if err := j.books(d[0], d[1], false); err != nil {
					rt.Fatal(err)
				}
			}
		}
		// Both sides out of credits with frames waiting must not
		// deadlock: explicit credit frames get through.
		j.until("every frame", func() bool {
			ab.retry()
			ba.retry()
			return len(j.got[1]) == len(ab.sizes) && len(j.got[0]) == len(ba.sizes)
		})
		ab.check()
		ba.check()
		j.until("the books to balance", func() bool { return j.books(0, 1, true) == nil && j.books(1, 0, true) == nil })
		for _, d := range [][2]int{{0, 1}, {1, 0}} {
			// A receive queue never overflowed: credited frames never
			// outnumbered the buffers (books, above), and without an
			// optimistic credit frame to take a buffer, no frame ever
			// found them all taken.
			if rnr, cf := j.perPeerRNR(d[0], d[1]); rnr > 0 && cf == 0 {
				rt.Fatalf("%d→%d: %d RNR NAKs without a credit frame", d[0], d[1], rnr)
			}
		}
	})
}

func TestTheHardwareSchemeWithOneBufferStillDeliversEverything(t *testing.T) {
	o := fcOpts(t, "P,256,8,1,1", hardwareFlow(1))
	o.params["min_rnr_timer"] = "10us"
	j := openJob(t, 2, o)
	s := &stream{j: j, from: 0, to: 1}
	s.add(1, 10)
	j.until("the connection", func() bool { s.retry(); return len(j.got[1]) == 1 })
	// Rank 1 stops handling frames: its HCA fills the one buffer posted
	// and NAKs the rest; nothing waits in software.
	s.add(100, 200)
	if s.accepted != s.queued {
		t.Fatalf("the hardware scheme held back %d frames in software", s.queued-s.accepted)
	}
	if c := j.ep(0, 1).cred[0]; c.held || j.mods[0].credit.stalls.Load() != 0 {
		t.Fatal("the hardware scheme counted a stall")
	}
	j.until("RNR NAKs", func() bool {
		j.mods[0].Progress()
		rnr, _ := j.perPeerRNR(0, 1)
		return rnr > 0
	})
	j.until("every frame", func() bool { s.retry(); return len(j.got[1]) == len(s.sizes) })
	s.check()
	if n := j.mods[1].credit.creditMsgs.Load() + j.mods[0].credit.creditMsgs.Load(); n != 0 {
		t.Fatalf("%d explicit credit frames under the hardware scheme", n)
	}
	// The per-peer counter reports them from housekeeping.
	j.until("the RNR counter", func() bool { return j.ep(0, 1).st.rnr.Load() > 0 })
}

func TestStaticSchemeStallsReturnCreditsAndPreferRendezvous(t *testing.T) {
	j := openJob(t, 2, fcOpts(t, "P,256,8,1,1", staticFlow(3, 5, true)))
	s := &stream{j: j, from: 0, to: 1}
	s.add(1, 10)
	j.until("the connection", func() bool { s.retry(); return len(j.got[1]) == 1 })
	e := j.ep(0, 1)
	// Two credits left (rank 1 owes one, below min(5, 3 posted)): two
	// frames go, the third is refused and the rendezvous preference starts.
	s.add(10, 10)
	if s.accepted != 3 || !e.cred[0].held || !e.PreferRendezvous() || e.st.rndv.Load() != 1 || e.st.stalls.Load() != 1 {
		t.Fatalf("accepted %d of 11, held %v, rndv %d, stalls %d", s.accepted, e.cred[0].held, e.st.rndv.Load(), e.st.stalls.Load())
	}
	// Rank 1 owes 3 with a threshold of 5: min(5, 3 posted) makes them
	// due, and they go explicitly since rank 1 has nothing to send.
	j.until("every frame", func() bool { s.retry(); return len(j.got[1]) == len(s.sizes) })
	s.check()
	if j.mods[1].credit.creditMsgs.Load() == 0 || e.st.waited.Load() == 0 || e.st.waitNs.Load() <= 0 || j.mods[1].credit.backlogRx.Load() != e.st.waited.Load() {
		t.Fatalf("credit frames %d, backlogged %d (%d ns), received with the bit %d",
			j.mods[1].credit.creditMsgs.Load(), e.st.waited.Load(), e.st.waitNs.Load(), j.mods[1].credit.backlogRx.Load())
	}
	j.until("credits", func() bool { return e.cred[0].avail > 0 })
	if e.PreferRendezvous() {
		t.Fatal("rendezvous preferred with credits")
	}
}

func TestCreditsPiggybackOnTheApplicationsAnswerInsteadOfAnExplicitFrame(t *testing.T) {
	// One buffer each way, threshold 5: every frame makes its credit due
	// at once (min(5, 1)), but a ping-pong's answer carries it — also an
	// answer too large for the per-peer queue: a frame on a shared queue
	// carries the first per-peer queue's credits.
	for _, c := range []struct {
		name   string
		o      jobOpts
		answer int
	}{
		{"per-peer queue", fcOpts(t, "P,256,8,1,1", staticFlow(1, 5, false)), 8},
		{"answer on a shared queue", jobOpts{flow: staticFlow(1, 5, false),
			params: map[string]string{"receive_queues": "P,256,8,1,1:S,2048,8,6,0", "eager_limit": "1KiB"}}, 1024},
	} {
		t.Run(c.name, func(t *testing.T) { piggyback(t, c.o, c.answer) })
	}
}

// piggyback runs a ping-pong of 8-byte pings and answer-byte answers
// and fails if credits went back in explicit frames.
func piggyback(t *testing.T, o jobOpts, answer int) {
	j := openJob(t, 2, o)
	ping, pong := &stream{j: j, from: 0, to: 1}, &stream{j: j, from: 1, to: 0}
	size := map[*stream]int{ping: 8, pong: answer}
	ping.add(1, 8)
	pong.add(1, answer)
	j.until("the connection", func() bool { ping.retry(); pong.retry(); return len(j.got[0]) == 1 && len(j.got[1]) == 1 })
	// Each rank on its own goroutine, as a process would be: a blocking
	// send progresses until the frame is taken, a receive until the
	// message is in; then the answer.
	send := func(s *stream) error {
		s.add(1, size[s])

		for deadline := time.Now().Add(10 * time.Second); s.accepted < s.queued; s.retry() {
			if j.mods[s.from].Progress() == 0 && time.Now().After(deadline) {
				return fmt.Errorf("rank %d: send refused for 10s", s.from)
			}
		}
		return nil
	}
	recv := func(rank, n int) error {
		for deadline := time.Now().Add(10 * time.Second); len(j.got[rank]) < n; {
			if j.mods[rank].Progress() == 0 && time.Now().After(deadline) {
				return fmt.Errorf("rank %d: no message %d", rank, n)
			}
		}
		return nil
	}
	before := j.mods[0].credit.creditMsgs.Load() + j.mods[1].credit.creditMsgs.Load()

	const rounds = 200
	errs := make(chan error, 2)
	go func() {
		for i := 2; i <= rounds+1; i++ {
			if err := send(ping); err != nil {
				errs <- err
				return
			}
			if err := recv(0, i); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for i := 2; i <= rounds+1; i++ {
			if err := recv(1, i); err != nil {
				errs <- err
				return
			}
			if err := send(pong); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ping.check()
	pong.check()
	if n := j.mods[0].credit.creditMsgs.Load() + j.mods[1].credit.creditMsgs.Load() - before; n > 2 {
		t.Fatalf("%d explicit credit frames in a ping-pong whose every frame carries the credit back", n)
	}
}

func TestTheDynamicSchemeGrowsABackloggedPeerUpToMax(t *testing.T) {
	var pols []*ibdynamic.Policy
	flow := func() core.FlowControl {
		p := &ibdynamic.Policy{Initial: 1, Max: 6, Step: 1, Threshold: 5}
		pols = append(pols, p)
		return p
	}
	j := openJob(t, 2, fcOpts(t, "P,256,8,1,1", flow))
	s := &stream{j: j, from: 0, to: 1}
	// Bursts of 20 one-way frames: every stall sends a frame with the
	// backlog bit, and rank 1 grows rank 0's buffers, one per such frame.
	for range 10 {
		s.add(20, 50)
		j.until("the burst", func() bool { s.retry(); return len(j.got[1]) == len(s.sizes) })
	}
	s.check()
	rx := j.ep(1, 0)
	if got := rx.cred[0].maxPosted; got != 6 || rx.st.postedMax.Load() != 6 || rx.cred[0].posted != 6 {
		t.Fatalf("rank 1 posted at most %d (gauge %d, now %d) for rank 0, want max 6", got, rx.st.postedMax.Load(), rx.cred[0].posted)
	}
	if pols[1].Grown == 0 || j.mods[1].credit.backlogRx.Load() < 5 {
		t.Fatalf("grown %d times on %d backlogged frames", pols[1].Grown, j.mods[1].credit.backlogRx.Load())
	}
	// Rank 0 was never backlogged by rank 1: it keeps one buffer.
	if got := j.ep(0, 1).cred[0].maxPosted; got != 1 {
		t.Fatalf("rank 0 grew rank 1's buffers to %d without a backlogged frame", got)
	}
	j.until("the books", func() bool { return j.books(0, 1, true) == nil })
}

func TestAQuietPeerShrinksToItsInitialBuffersAsItResumes(t *testing.T) {
	clk := &core.ManualClock{}
	var pols []*ibdynamic.Policy
	flow := func() core.FlowControl {
		p := &ibdynamic.Policy{Initial: 2, Max: 8, Step: 2, Threshold: 5, ShrinkAfter: 4 * time.Millisecond}
		pols = append(pols, p)
		return p
	}
	o := fcOpts(t, "P,256,8,1,1", flow)
	o.clock = clk
	j := openJob(t, 2, o)
	s := &stream{j: j, from: 0, to: 1}
	for range 5 {
		s.add(30, 50)
		j.until("the burst", func() bool { s.retry(); return len(j.got[1]) == len(s.sizes) })
	}
	rx := j.ep(1, 0)
	if rx.cred[0].posted != 8 {
		t.Fatalf("grown to %d, want 8", rx.cred[0].posted)
	}
	// Quiet: housekeeping reports the silence at 1, 2, 4, 8 ms...; the
	// policy halves at 4 ms and again at 8 and 16.
	for range 40 {
		clk.Advance(time.Millisecond)
		j.progress()
	}
	if got := pols[1].Target(0); got != 2 {
		t.Fatalf("the policy's target after 40 ms of silence: %d, want the initial 2", got)
	}
	// Nothing is taken from under the sender: all 8 stay posted (and
	// owed or credited) until frames come back into them.
	if rx.cred[0].posted != 8 || rx.cred[0].target != 2 {
		t.Fatalf("posted %d target %d before any frame", rx.cred[0].posted, rx.cred[0].target)
	}
	// The peer resumes with six frames: each lands in a buffer that is
	// then retired, until 2 are left, and nothing waits for a credit (the
	// sender held 8).
	stalls := j.ep(0, 1).st.stalls.Load()
	for range 6 {
		s.add(1, 50)
		j.until("the frame", func() bool { s.retry(); return len(j.got[1]) == len(s.sizes) })
	}
	s.check()
	if rx.cred[0].posted != 2 || len(j.mods[1].rx.queues[0].pool) != 6 || j.ep(0, 1).st.stalls.Load() != stalls {
		t.Fatalf("posted %d with %d retired after the peer resumed, want 2 and 6; %d stalls while resuming",
			rx.cred[0].posted, len(j.mods[1].rx.queues[0].pool), j.ep(0, 1).st.stalls.Load()-stalls)
	}
	j.until("the books", func() bool { return j.books(0, 1, true) == nil })
}

func TestTheMechanismChecksEveryDecision(t *testing.T) {
	j := openJob(t, 3, fcOpts(t, "P,256,8,1,1", func() core.FlowControl { return &ibdynamic.Policy{Initial: 2, Max: 4, Step: 1, Threshold: 5} }))
	s := &stream{j: j, from: 1, to: 0}
	s.add(1, 10)
	j.until("the connection", func() bool { s.retry(); return len(j.got[0]) == 1 })
	m := j.mods[0]
	e := j.ep(0, 1)
	m.credit.flow.Dispose([]core.FlowDecision{
		{Kind: core.FlowSetQuota, Peer: 2, Value: 4},   // not connected
		{Kind: core.FlowSetQuota, Peer: 9, Value: 4},   // no such rank
		{Kind: core.FlowSetThreshold, Value: 0},        // below one
		{Kind: core.FlowReclaim, Peer: 1},              // EXTOLL's, not ib's
		{Kind: core.FlowQuiet, Peer: 9},                // no such rank
		{Kind: core.FlowSetQuota, Peer: 1, Value: 100}, // clamped to max
		{Kind: core.FlowQuiet, Peer: 2, Value: 7},      // asks for nothing
		{Kind: core.FlowQuiet, Peer: 1, Value: 1},      // asks for nothing
	})
	if r := m.rejected.Load(); r != 5 {
		t.Fatalf("%d decisions rejected, want 5", r)
	}
	if ev := m.credit.flow.Waiting(); e.cred[0].posted != 4 || e.cred[0].target != 4 || m.credit.clamped.Load() != 1 || len(ev) != 1 || ev[0].Kind != core.FlowQuota || ev[0].Quota != 4 {
		t.Fatalf("posted %d, target %d, clamped %d, events %+v", e.cred[0].posted, e.cred[0].target, m.credit.clamped.Load(), ev)
	}
	m.credit.flow.Dispose([]core.FlowDecision{{Kind: core.FlowSetQuota, Peer: 1, Value: 0}}) // clamped to initial
	if e.cred[0].target != 2 {
		t.Fatalf("target %d, want the initial 2", e.cred[0].target)
	}
	// The grown buffers' credits (owed, with the one for the frame, 3 of
	// 4 posted: below the threshold) ride back on rank 0's next frame.
	j.until("the books", func() bool { return j.books(1, 0, true) == nil })
	back := &stream{j: j, from: 0, to: 1}
	back.add(1, 10)
	j.until("the credits", func() bool { back.retry(); return j.ep(1, 0).cred[0].avail == 4 })
}

func TestMisconfiguredFlowControlIsAClearError(t *testing.T) {
	boots := newBoots(2)
	for _, c := range []struct {
		name   string
		params map[string]string
		flow   core.FlowControl
		want   string
	}{
		{"a policy for a slot pool", nil, extollish{}, "slot pool"},
		{"rndv_on_no_credit in two places", map[string]string{"rndv_on_no_credit": "true"}, &ibstatic.Policy{PrePost: 4, Threshold: 5}, "set it in the policy block"},
		{"rnr_retry in two places", map[string]string{"rnr_retry": "3"}, &ibstatic.Policy{PrePost: 4, Threshold: 5}, "set it in one place"},
		{"a hardware scheme that grows", nil, growingHardware{}, "no growth"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := core.MustParams(Params)
			for k, v := range c.params {
				p.SetText(k, v)
			}
			_, err := openBTL(core.BTLEnv{Params: p, Boot: boots[0], Clock: core.SystemClock, FlowControl: c.flow, Metrics: core.NewMetrics()})
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Fatalf("open: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func TestRanksWithDifferentSchemesRefuseToConnect(t *testing.T) {
	boots := newBoots(2)
	mods := make([]*module, 2)
	for r, f := range []core.FlowControl{&ibstatic.Policy{PrePost: 4, Threshold: 5}, &ibhardware.Policy{PrePost: 4, RNRRetry: 7}} {
		ms, err := openBTL(core.BTLEnv{Params: core.MustParams(Params), Boot: boots[r], Clock: core.SystemClock, FlowControl: f, Metrics: core.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		mods[r] = ms[0].(*module)
		t.Cleanup(func() { mods[r].Close() })
	}
	j := &job{t: t, mods: mods, got: make([][]frame, 2)}
	fence(boots)
	err := j.ep(0, 1).Send(core.Header{Type: testType}, nil, []byte("x"), 0)
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, core.ErrNoResources) && time.Now().Before(deadline); {
		j.progress()
		err = j.ep(0, 1).Send(core.Header{Type: testType}, nil, []byte("x"), 0)
	}
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("same flow-control policy")) {
		t.Fatalf("send between a static and a hardware rank: %v", err)
	}
}

type extollish struct{}

func (extollish) Setup(core.FlowInfo) (core.FlowSetup, error) {
	return core.FlowSetup{Scheme: core.FlowCredits, CreditSlots: 2, Quota: 4}, nil
}
func (extollish) Observe(_ []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision { return out }

type growingHardware struct{ extollish }

func (growingHardware) Setup(core.FlowInfo) (core.FlowSetup, error) {
	return core.FlowSetup{Scheme: core.FlowNone, Quota: 2, MaxQuota: 8}, nil
}

// Seed 000 §4.2: an explicit credit message goes once the receiver owes
// the threshold (5) — exactly then, not one later — or, when fewer
// buffers are posted than the threshold, once it owes all of them.
func TestExplicitCreditsAreDueAtTheThresholdExactly(t *testing.T) {
	for _, c := range []struct {
		owed, target, threshold int
		due                     bool
	}{
		{0, 100, 5, false},
		{4, 100, 5, false},
		{5, 100, 5, true},
		{6, 100, 5, true},
		{2, 3, 5, false},
		{3, 3, 5, true},
		{1, 1, 1, true},
		{0, 0, 1, false},
	} {
		cr := credits{owed: c.owed, target: c.target}
		if got := cr.due(c.threshold); got != c.due {
			t.Errorf("owed %d, %d posted, threshold %d: due %v, want %v", c.owed, c.target, c.threshold, got, c.due)
		}
	}
}

// Seed 000 §4.3: "a bit in each message" says it went through the
// backlog, so the receiver sees every message that waited for a credit —
// the head of a stall and each one queued behind it — and no other.
func TestEveryFrameThatWaitedCarriesTheBacklogBit(t *testing.T) {
	j := openJob(t, 2, fcOpts(t, "P,256,8,1,1", staticFlow(3, 5, false)))
	s := &stream{j: j, from: 0, to: 1}
	s.add(1, 10)
	j.until("the connection", func() bool { s.retry(); return len(j.got[1]) == 1 })
	s.add(12, 10)
	j.until("every frame", func() bool { s.retry(); return len(j.got[1]) == len(s.sizes) })
	s.check()
	waited := 0
	for _, f := range j.got[1] {
		i := int(f.h.Tag)
		if got := f.h.Flags&core.FlagBacklog != 0; got != s.waited[i] {
			t.Errorf("frame %d: backlog bit %v, went through the backlog %v", i, got, s.waited[i])
		}
		if s.waited[i] {
			waited++
		}
	}
	e := j.ep(0, 1)
	if waited < 9 || e.st.stalls.Load() == 0 || int(e.st.waited.Load()) != waited || int(j.mods[1].credit.backlogRx.Load()) != waited {
		t.Fatalf("%d frames waited in %d stalls; counted %d sent and %d received with the bit",
			waited, e.st.stalls.Load(), e.st.waited.Load(), j.mods[1].credit.backlogRx.Load())
	}
}
