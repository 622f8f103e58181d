package btltest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// The subtests of the optional capability sets beyond RDMA and Notifier:
// the eager fast path (core.Eager), back-pressure (core.Resources), and
// Disconnect, which every module has.

// eagerCtx is the context of the eager subtests' EAGER frames.
const eagerCtx = 7

// eagerPair opens a two-rank job and returns the eager set of the sender's
// endpoint to the receiver and of the receiver's back, or skips the test
// when the transport does not offer it.
func eagerPair(t *testing.T, cfg Config) (j *job, tx, rx int, out, in core.Eager) {
	j = openJob(t, cfg, 2)
	tx, rx = j.pair()
	out, ok := j.eps[tx][rx].(core.Eager)
	if !ok {
		t.Skipf("%s offers no eager fast path", cfg.Component)
	}
	if in, ok = j.eps[rx][tx].(core.Eager); !ok {
		t.Fatalf("the endpoint from rank %d to %d is a core.Eager, the one back is not", tx, rx)
	}
	return j, tx, rx, out, in
}

// eagerFrame is a frame of the eager order test: what was sent at one PSN.
type eagerFrame struct {
	typ  core.FrameType
	ctx  uint32
	tag  int32
	data []byte
}

// eagerSend sends f at psn from tx to rx: by SendEager when direct and it
// takes it, else by Send.
func (j *job) eagerSend(tx, rx int, out core.Eager, f eagerFrame, psn uint32, direct bool) {
	if direct && f.typ == core.TypeEager && out.SendEager(f.ctx, f.tag, psn, f.data) {
		return
	}
	j.send(tx, rx, core.Header{Type: f.typ, Src: int32(tx), Context: f.ctx, Tag: f.tag, PSN: psn}, nil, f.data)
}

// eagerFrames makes n frames, most of them small EAGER frames on eagerCtx
// that SendEager may take, mixed with EAGER frames longer than most direct
// ways, EAGER frames of another context, and frames of another type.
func eagerFrames(n, maxSend int) []eagerFrame {
	rng := rand.New(rand.NewPCG(5, 6))
	fs := make([]eagerFrame, n)
	for i := range fs {
		f := eagerFrame{typ: core.TypeEager, ctx: eagerCtx, tag: int32(rng.IntN(5) - 1)}
		size := rng.IntN(65)
		switch rng.IntN(10) {
		case 0:
			size = rng.IntN(maxSend + 1)
		case 1:
			f.ctx = eagerCtx + 1
		case 2:
			f.typ = frameType
		}
		f.data = msgtest.Fill(make([]byte, size), uint64(i))
		fs[i] = f
	}
	return fs
}

// testEager sends a mix of frames by SendEager and Send and receives them
// by TakeEager, through filters that pass and filters that do not, and by
// Progress, at random: every frame arrives once, in the order sent,
// whichever way; TakeEager takes or shows only the in-order EAGER frame on
// the context asked for, takes it only when its tag passes the filter and
// the buffer holds it, and leaves it in place otherwise, for Progress to
// deliver.
func testEager(t *testing.T, cfg Config) {
	j, tx, rx, out, in := eagerPair(t, cfg)
	frames := eagerFrames(3000, j.mods[tx].Attrs().MaxSendSize)
	var next uint32 // the PSN the receiver expects
	took, kept := 0, 0
	check := func(how string, psn uint32, typ core.FrameType, ctx uint32, tag int32, payload []byte) {
		t.Helper()
		if psn != next || psn >= uint32(len(frames)) {
			t.Fatalf("%s delivered the frame of PSN %d when %d was next", how, psn, next)
		}
		f := frames[psn]
		if typ != f.typ || ctx != f.ctx || tag != f.tag || !bytes.Equal(payload, f.data) {
			t.Fatalf("%s delivered frame %d as type %v context %d tag %d, %d bytes; sent as %v %d %d, %d bytes (or the payload differs)",
				how, psn, typ, ctx, tag, len(payload), f.typ, f.ctx, f.tag, len(f.data))
		}
		next++
	}
	for _, typ := range []core.FrameType{core.TypeEager, frameType} {
		if err := j.mods[rx].Register(typ, func(h *core.Header, p []byte) {
			check("Progress", h.PSN, h.Type, h.Context, h.Tag, p)
		}); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	buf := make([]byte, j.mods[tx].Attrs().MaxSendSize)
	take := func() bool {
		psn := next
		f := frames[psn]
		tag, ignore, passes := eagerFilter(rng, f.tag)
		b := buf
		if rng.IntN(8) == 0 && len(f.data) > 0 {
			b, passes = buf[:len(f.data)-1], false
		}
		htag, n, res := in.TakeEager(eagerCtx, psn, tag, ignore, b)
		switch res {
		case core.EagerTaken:
			if !passes {
				t.Fatalf("TakeEager took frame %d of tag %d, %d bytes, through filter %d/%#x into %d bytes", psn, f.tag, len(f.data), tag, ignore, len(b))
			}
			check("TakeEager", psn, core.TypeEager, eagerCtx, htag, b[:n])
			took++
			return true
		case core.EagerKept:
			if passes || f.typ != core.TypeEager || f.ctx != eagerCtx || htag != f.tag || n != len(f.data) {
				t.Fatalf("TakeEager kept frame %d (%v, context %d, tag %d, %d bytes) showing tag %d, %d bytes, through filter %d/%#x into %d bytes",
					psn, f.typ, f.ctx, f.tag, len(f.data), htag, n, tag, ignore, len(b))
			}
			kept++ // left in place: Progress delivers it
		}
		return false
	}
	receive := func() {
		if next >= uint32(len(frames)) {
			return
		}
		if _, _, r := in.TakeEager(eagerCtx, next+1, 0, core.IgnoreTag, buf); r == core.EagerTaken || r == core.EagerKept {
			t.Fatalf("TakeEager found a frame for PSN %d when %d was next: %v", next+1, next, r)
		}
		for next < uint32(len(frames)) && take() {
			if rng.IntN(3) == 0 {
				break
			}
		}
		j.progress()
	}
	for psn, f := range frames {
		j.eagerSend(tx, rx, out, f, uint32(psn), rng.IntN(4) != 0)
		for range rng.IntN(3) {
			receive()
		}
	}
	j.until("every frame", func() bool { receive(); return next == uint32(len(frames)) })
	if took == 0 || kept == 0 {
		t.Errorf("TakeEager took %d frames and kept %d: the eager set's direct way was not exercised", took, kept)
	}
	t.Logf("%d of %d frames taken by TakeEager, %d kept for Progress", took, len(frames), kept)
}

// eagerFilter returns a TakeEager filter for a frame of tag htag, and
// whether it passes: the tag itself, another tag, any tag, or the tag
// with a bit changed that the mask ignores or compares.
func eagerFilter(rng *rand.Rand, htag int32) (tag int32, ignore uint32, passes bool) {
	switch rng.IntN(5) {
	case 0:
		return htag, 0, true
	case 1:
		return htag + 1, 0, false
	case 2:
		return rng.Int32(), core.IgnoreTag, true
	case 3:
		return htag ^ 0x100, 0x100, true
	}
	return htag ^ 0x100, 0xff, false
}

// testEagerAside checks that the eager receive path steps aside inside a
// handler, even for the frame the handler is delivering, and for a lost
// peer, and that SendEager sends nothing to a lost peer.
func testEagerAside(t *testing.T, cfg Config) {
	j, tx, rx, out, in := eagerPair(t, cfg)
	data := []byte("in place")
	var inside []core.EagerResult
	delivered := 0
	j.mods[rx].Register(core.TypeEager, func(h *core.Header, p []byte) {
		delivered++
		_, _, r1 := in.TakeEager(eagerCtx, h.PSN, 0, core.IgnoreTag, make([]byte, len(p)))
		_, _, r2 := in.TakeEager(eagerCtx, h.PSN+1, 0, core.IgnoreTag, make([]byte, len(p)))
		inside = append(inside, r1, r2)
	})
	j.eagerSend(tx, rx, out, eagerFrame{core.TypeEager, eagerCtx, 1, data}, 0, false)
	j.eagerSend(tx, rx, out, eagerFrame{core.TypeEager, eagerCtx, 1, data}, 1, true)
	// Shown before Progress runs (a filter for another tag keeps it),
	// then delivered by Progress, whose handler finds nothing to take.
	j.until("the first frame in place or delivered", func() bool {
		_, _, r := in.TakeEager(eagerCtx, 0, 2, 0, make([]byte, len(data)))
		return r == core.EagerKept || delivered > 0
	})
	j.until("both frames delivered by Progress", func() bool { return delivered == 2 })
	for i, r := range inside {
		if r != core.EagerNone {
			t.Fatalf("call %d from a handler: %v, want EagerNone", i, r)
		}
	}
	// A lost peer: nothing taken from it, nothing sent to it.
	j.eagerSend(tx, rx, out, eagerFrame{core.TypeEager, eagerCtx, 1, data}, 2, true)
	j.mods[rx].Disconnect(tx, errors.New("btltest: the eager path with a lost peer"))
	if _, _, r := in.TakeEager(eagerCtx, 2, 0, core.IgnoreTag, make([]byte, len(data))); r != core.EagerNone {
		t.Errorf("TakeEager from a peer this rank disconnected: %v", r)
	}
	if in.SendEager(eagerCtx, 1, 0, data) {
		t.Error("SendEager to a peer this rank disconnected took the frame")
	}
}

// testEagerAllocs pins the eager set's steady state at zero allocations: a
// SendEager (or Send, where declined) and the TakeEager that takes it.
func testEagerAllocs(t *testing.T, cfg Config) {
	if cfg.NoAllocCheck || raceEnabled {
		t.Skip("allocation counts are not meaningful here")
	}
	j, tx, rx, out, in := eagerPair(t, cfg)
	delivered := 0
	j.mods[rx].Register(core.TypeEager, func(*core.Header, []byte) { delivered++ })
	payload, buf := make([]byte, 8), make([]byte, 8)
	var psn uint32
	pingOnce := func() {
		j.eagerSend(tx, rx, out, eagerFrame{core.TypeEager, eagerCtx, 7, payload}, psn, true)
		for at := delivered; delivered == at; j.progress() {
			if _, _, r := in.TakeEager(eagerCtx, psn, 7, 0, buf); r == core.EagerTaken {
				break
			}
		}
		psn++
	}
	for range 1000 {
		pingOnce()
	}
	if allocs := testing.AllocsPerRun(2000, pingOnce); allocs != 0 {
		t.Errorf("an 8-byte SendEager plus the TakeEager that takes it allocate %.2f times", allocs)
	}
}

// testResources checks the back-pressure set against a receiver that does
// not progress: while Replenished stands after a refusal, the same send is
// refused again; the count is never negative in flight and comes back to
// zero once the receiver has consumed everything.
func testResources(t *testing.T, cfg Config) {
	if cfg.Loopback {
		t.Skip("a rank sending to itself is its own receiver")
	}
	j := openJob(t, cfg, 2)
	res, ok := j.eps[0][1].(core.Resources)
	if !ok {
		t.Skipf("%s offers no resources set", cfg.Component)
	}
	got := j.record()
	ep := j.eps[0][1]
	data := make([]byte, j.mods[0].Attrs().MaxSendSize)
	sent := 0
	frame := func() core.Header { return core.Header{Type: frameType, Src: 0, PSN: uint32(sent)} }
	var err error
	for ; sent < 1<<20; sent++ {
		if err = ep.Send(frame(), nil, data, 0); err != nil {
			break
		}
		j.mods[0].Progress()
	}
	if !errors.Is(err, core.ErrNoResources) {
		t.Fatalf("a stalled receiver: Send returned %v after %d frames, want ErrNoResources", err, sent)
	}
	for range 200 {
		gen := res.Replenished()
		j.mods[0].Progress()
		if n := res.FragsInFlight(); n < 0 || n > sent {
			t.Fatalf("FragsInFlight = %d with %d frames sent", n, sent)
		}
		if res.Replenished() != gen {
			continue
		}
		if err := ep.Send(frame(), nil, data, 0); err == nil {
			t.Fatalf("a send passed while Replenished stood at %d since the last refusal", gen)
		} else if !errors.Is(err, core.ErrNoResources) {
			t.Fatal(err)
		}
	}
	// The receiver resumes: a send that passes after a refusal passes
	// only once the count has moved.
	total := sent + 50
	deadline := time.Now().Add(j.cfg.Timeout)
	for refusedAt, refused := uint64(0), false; sent < total; j.progress() {
		err := ep.Send(frame(), nil, data, 0)
		switch {
		case err == nil && refused && res.Replenished() == refusedAt:
			t.Fatalf("frame %d passed after a refusal with Replenished still at %d", sent, refusedAt)
		case err == nil:
			sent, refused = sent+1, false
		case !errors.Is(err, core.ErrNoResources):
			t.Fatal(err)
		case time.Now().After(deadline):
			t.Fatalf("frame %d stayed refused for %v", sent, j.cfg.Timeout)
		default:
			refusedAt, refused = res.Replenished(), true
		}
	}
	j.until("the frames sent under back-pressure", func() bool { return len(got[1]) == total })
	j.until("FragsInFlight back to 0", func() bool { return res.FragsInFlight() == 0 })
}

// testDisconnect checks Disconnect: sends to the dropped peer fail with
// ErrPeerLost, the peer hears of it through its OnPeerLost and its sends
// fail too, and the third rank talks to both as before.
func testDisconnect(t *testing.T, cfg Config) {
	if cfg.Loopback {
		t.Skip("no peer to disconnect")
	}
	j := openJob(t, cfg, 3)
	got := j.record()
	var lost1, lost0 []int
	j.mods[1].OnPeerLost(func(r int, err error) {
		if !errors.Is(err, core.ErrPeerLost) {
			t.Errorf("rank 1: OnPeerLost(%d, %v), want ErrPeerLost", r, err)
		}
		lost1 = append(lost1, r)
	})
	j.mods[0].OnPeerLost(func(r int, _ error) { lost0 = append(lost0, r) })
	for _, p := range [][2]int{{0, 1}, {1, 0}, {2, 0}, {2, 1}} {
		j.send(p[0], p[1], core.Header{Type: frameType, Src: int32(p[0])}, []byte("hello"), nil)
	}
	j.until("the greetings", func() bool { return len(got[0]) == 2 && len(got[1]) == 2 })
	j.mods[0].Disconnect(1, errors.New("btltest: dropped on purpose"))
	j.mods[0].Disconnect(1, errors.New("btltest: dropped twice")) // nothing more
	for _, bad := range []int{-1, 3, 1 << 20} {
		j.mods[0].Disconnect(bad, nil)
	}
	if err := j.eps[0][1].Send(core.Header{Type: frameType, Src: 0}, []byte("after"), nil, 0); !errors.Is(err, core.ErrPeerLost) {
		t.Errorf("a send to the peer this rank disconnected: %v, want ErrPeerLost", err)
	}
	if core.CapsOf(j.mods[0], j.eps[0][1]).Has(core.CapRDMA) {
		remote, local := make([]byte, 64), make([]byte, 64)
		_, rkey := register(t, j.mods[1], remote, core.AccessRemoteRead|core.AccessRemoteWrite)
		lrg, _ := register(t, j.mods[0], local, core.AccessLocalWrite|core.AccessRemoteRead)
		c := &completer{j: j}
		op := &core.RDMAOp{Local: local, Region: lrg, Remote: rkey, Done: c}
		if err := j.eps[0][1].(core.RDMA).Get(op); err == nil {
			j.until("the Get's completion", func() bool { return c.done > 0 })
			if len(c.errs) == 0 {
				t.Error("a Get from the peer this rank disconnected succeeded")
			}
		}
	}
	j.until("rank 1 hearing of it", func() bool { return len(lost1) > 0 })
	if lost1[0] != 0 || len(lost1) > 1 {
		t.Fatalf("rank 1 heard of the loss of ranks %v, want [0]", lost1)
	}
	sendFails(t, j, 1, 0)
	j.send(2, 0, core.Header{Type: frameType, Src: 2}, []byte("still here"), nil)
	j.send(2, 1, core.Header{Type: frameType, Src: 2}, []byte("still here"), nil)
	j.until("the third rank's frames", func() bool { return len(got[0]) == 3 && len(got[1]) == 3 })
	for _, r := range lost0 {
		if r != 1 {
			t.Errorf("rank 0 reported rank %d lost", r)
		}
	}
}

// sendFails sends from rank from to rank to until a send fails with
// ErrPeerLost, progressing in between, and fails the test after the
// timeout.
func sendFails(t *testing.T, j *job, from, to int) {
	t.Helper()
	deadline := time.Now().Add(j.cfg.Timeout)
	for {
		err := j.eps[from][to].Send(core.Header{Type: frameType, Src: int32(from)}, []byte("anyone?"), nil, 0)
		switch {
		case errors.Is(err, core.ErrPeerLost):
			return
		case err != nil && !errors.Is(err, core.ErrNoResources):
			t.Fatal(fmt.Errorf("rank %d: send to rank %d: %w, want ErrPeerLost", from, to, err))
		case time.Now().After(deadline):
			t.Fatalf("rank %d: sends to rank %d, which disconnected it, keep succeeding", from, to)
		}
		j.progress()
	}
}
