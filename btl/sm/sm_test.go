package sm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/rs/zerolog"
)

var testJob int

// openRanks opens n ranks in this process with params overriding defaults.
func openRanks(t testing.TB, n int, params map[string]string) ([]*Module, *core.Metrics) {
	t.Helper()
	return openRanksOn(t, core.OneNode(n), params)
}

// openRanksOn opens a rank for every entry of nodes, which the engine's
// locality puts on those nodes.
func openRanksOn(t testing.TB, nodes core.NodeMap, params map[string]string) ([]*Module, *core.Metrics) {
	t.Helper()
	testJob++
	n := len(nodes)
	boots := boot.GroupOn(fmt.Sprintf("smtest%d-%d", os.Getpid(), testJob), nodes)
	metrics := core.NewMetrics()
	mods := make([]*Module, n)
	for r := range n {
		p := core.MustParams(Params)
		for k, v := range params {
			if err := p.SetText(k, v); err != nil {
				t.Fatal(err)
			}
		}
		ms, err := Open(core.BTLEnv{Params: p, Boot: boots[r], Locality: core.LocalityOf(boots[r]), Log: zerolog.Nop(), Metrics: metrics})
		if err != nil {
			t.Fatal(err)
		}
		mods[r] = ms[0].(*Module)
		t.Cleanup(func() { mods[r].Close() })
	}
	var wg sync.WaitGroup
	for _, b := range boots {
		wg.Go(func() { b.Fence(context.Background()) })
	}
	wg.Wait()
	return mods, metrics
}

func progressUntil(t *testing.T, mods []*Module, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 10_000_000 {
			t.Fatal("condition never held")
		}
		for _, m := range mods {
			m.Progress()
		}
	}
}

func TestACorruptSlotFailsThePeerAndIsNeverDelivered(t *testing.T) {
	mods, metrics := openRanks(t, 2, nil)
	delivered := 0
	mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { delivered++ })
	var lostErr error
	mods[1].OnPeerLost(func(r int, err error) { lostErr = err })
	ep, _ := mods[0].Endpoint(1)
	ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, []byte("good"), nil, 0)
	progressUntil(t, mods, func() bool { return delivered == 1 })

	// The next frame's header gets a version nobody speaks.
	p := mods[0].peers[1]
	idx := p.out.tail & p.out.mask
	ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, []byte("bad"), nil, 0)
	p.out.ring[idx+slotHdr] = 99
	progressUntil(t, mods, func() bool { return lostErr != nil })
	if !errors.Is(lostErr, core.ErrBadFrame) || delivered != 1 {
		t.Fatalf("lost with %v after %d deliveries", lostErr, delivered)
	}
	mods[1].st.flush()
	if n := metrics.Counter("sm.bad_frames").Load(); n != 1 {
		t.Errorf("sm.bad_frames = %d", n)
	}
}

func TestAFrameClaimingAnotherSourceIsBad(t *testing.T) {
	mods, _ := openRanks(t, 3, nil)
	delivered := 0
	mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { delivered++ })
	var lost []int
	mods[1].OnPeerLost(func(r int, err error) { lost = append(lost, r) })
	ep, _ := mods[0].Endpoint(1)
	ep.Send(core.Header{Type: core.TypeUserBase, Src: 2}, []byte("I am rank 2"), nil, 0)
	progressUntil(t, mods, func() bool { return len(lost) > 0 })
	if lost[0] != 0 || delivered != 0 {
		t.Fatalf("lost %v, delivered %d", lost, delivered)
	}
}

func TestManyProducersShareOneFIFOInOrder(t *testing.T) {
	mods, _ := openRanks(t, 1, nil)
	seg := mods[0].seg
	const producers, each = 4, 20000
	var in fifoIn
	in.init(seg)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			var out fifoOut
			out.init(seg)
			for i := 0; i < each; {
				if out.push(makeDesc(p, i)) {
					i++
				}
			}
		})
	}
	next := make([]int, producers)
	for got := 0; got < producers*each; {
		d, ok := in.peek()
		if !ok {
			continue
		}
		in.pop()
		s, off := splitDesc(d)
		if off != next[s] {
			t.Fatalf("producer %d: got %d, want %d", s, off, next[s])
		}
		next[s]++
		got++
	}
	wg.Wait()
	if _, ok := in.peek(); ok {
		t.Fatal("the FIFO holds more than was pushed")
	}
}

func TestSegmentsAreRemovedAtCloseAndAbort(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	paths := []string{mods[0].seg.path, mods[1].seg.path}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("segment missing while open: %v", err)
		}
	}
	mods[0].Close()
	mods[1].Abort()
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists: %v", filepath.Base(p), err)
		}
	}
}

func TestARankBehindAnotherShmIsUnreachable(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	mods[0].host.Boot = "another machine"
	if _, err := mods[0].Endpoint(1); !errors.Is(err, core.ErrUnreachable) {
		t.Fatalf("Endpoint: %v, want ErrUnreachable", err)
	}
}

func TestBadParametersAreRefused(t *testing.T) {
	for _, params := range []map[string]string{
		{"fastbox_size": "4KiB", "fastbox_max": "4KiB"},
		{"eager_limit": "64KiB", "max_send_size": "32KiB"},
		{"rndv_eager_limit": "1MiB"},
	} {
		p := core.MustParams(Params)
		for k, v := range params {
			if err := p.SetText(k, v); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := configFrom(p); err == nil {
			t.Errorf("%v accepted", params)
		}
	}
	// The schema refuses these before the module sees them.
	for k, v := range map[string]string{
		"fastbox_size": "48KiB", "fragments": "1", "liveness_interval": "0s",
		"max_send_size": "512B", "node_size": "-1",
	} {
		if err := core.MustParams(Params).SetText(k, v); err == nil {
			t.Errorf("%s = %s was accepted", k, v)
		}
	}
}

// Without CMA the endpoints have no Put and Get (the RDMA set is not
// there), and keep the eager and resources sets.
func TestSingleCopyNoneOffersNoRDMA(t *testing.T) {
	mods, _ := openRanks(t, 2, map[string]string{"single_copy": "none"})
	ep, _ := mods[0].Endpoint(1)
	if c := core.CapsOf(mods[0], ep); c.Has(core.CapRDMA) || !c.Has(core.CapEager|core.CapResources) {
		t.Fatalf("sets %v, want eager and resources without rdma", c)
	}
	if _, ok := ep.(core.RDMA); ok {
		t.Fatal("the endpoint is a core.RDMA")
	}
}

type countDone struct{ n int }

func (c *countDone) RDMADone(*core.RDMAOp, error) { c.n++ }

func TestFragmentsAndCMAAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	mods, _ := openRanks(t, 2, map[string]string{"single_copy": "cma"})
	got := 0
	mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { got++ })
	ep, _ := mods[0].Endpoint(1)
	big := make([]byte, 16<<10) // beyond fastbox_max: a fragment
	frag := func() {
		want := got + 1
		for ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, nil, big, 0) != nil {
			mods[0].Progress()
			mods[1].Progress()
		}
		for got < want {
			mods[1].Progress()
		}
	}
	frag()
	if a := testing.AllocsPerRun(1000, frag); a != 0 {
		t.Errorf("a fragment send and delivery allocate %.2f times", a)
	}

	// With every fragment in flight the sender is refused, at every poll
	// until the receiver hands one back: that costs no allocation either.
	for ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, nil, big, 0) == nil {
	}
	full := func() {
		if err := ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, nil, big, 0); !errors.Is(err, core.ErrNoResources) {
			t.Fatalf("send with every fragment in flight: %v", err)
		}
	}
	if a := testing.AllocsPerRun(1000, full); a != 0 {
		t.Errorf("a send refused for want of a fragment allocates %.2f times", a)
	}
	if mods[0].health.checkSoon {
		t.Error("a send refused for want of a fragment asks for a liveness check (a system call at the next poll)")
	}
	progressUntil(t, mods, func() bool { return mods[0].tx.inflightN == 0 })

	remote := make([]byte, 1<<20)
	rg, _ := mods[1].RegisterMem(remote, core.AccessRemoteRead)
	local := make([]byte, 1<<20)
	done := &countDone{}
	op := &core.RDMAOp{Local: local, Remote: rg.Key(), Done: done}
	rdma := ep.(core.RDMA)
	get := func() {
		want := done.n + 1
		if err := rdma.Get(op); err != nil {
			t.Fatal(err)
		}
		for done.n < want {
			mods[0].Progress()
			mods[1].Progress() // the owner writes its share (coop.go)
		}
	}
	get()
	if a := testing.AllocsPerRun(200, get); a != 0 {
		t.Errorf("a CMA get allocates %.2f times", a)
	}
	if mods[1].st.cmaHelpBytes == 0 {
		t.Error("the get went from one end only: the test does not count the other's allocations")
	}
	reg := func() {
		r, _ := mods[0].RegisterMem(local, core.AccessLocalWrite)
		mods[0].DeregisterMem(r)
	}
	reg()
	if a := testing.AllocsPerRun(1000, reg); a != 0 {
		t.Errorf("RegisterMem+DeregisterMem allocate %.2f times", a)
	}
}

func TestSegmentsAreUnlinkedOnceEveryPeerHasMappedThem(t *testing.T) {
	mods, _ := openRanks(t, 3, nil)
	for _, m := range mods {
		if err := m.Attach(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// After the mapping fence: every name goes.
	for _, m := range mods {
		if err := m.Unlink(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(m.seg.path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after Unlink: %v", filepath.Base(m.seg.path), err)
		}
	}
	// Messages still flow, over the mappings Attach made, in every
	// direction: a small one through a fast box, a large one through a
	// fragment.
	got := map[[2]int]string{}
	for r, m := range mods {
		m.Register(core.TypeUserBase, func(h *core.Header, b []byte) { got[[2]int{int(h.Src), r}] += string(b) })
	}
	want := 0
	for s, m := range mods {
		for d := range mods {
			if d == s {
				continue
			}
			ep, err := m.Endpoint(d)
			if err != nil {
				t.Fatalf("endpoint %d->%d after Unlink: %v", s, d, err)
			}
			if err := ep.Send(core.Header{Type: core.TypeUserBase, Src: int32(s)}, []byte("hi"), make([]byte, 8000), 0); err != nil {
				t.Fatalf("send %d->%d: %v", s, d, err)
			}
			want++
		}
	}
	progressUntil(t, mods, func() bool { return len(got) == want })
	for k, v := range got {
		if len(v) != 8002 || v[:2] != "hi" {
			t.Fatalf("%d->%d delivered %d bytes", k[0], k[1], len(v))
		}
	}
}

// SendEager delivers the frame Send would, in the pair's order with
// frames Send sent; it declines, sending nothing, the first frame to a
// peer, a frame too long for the fast box, a full box and a dead peer.
func TestSendEagerDeliversWhatSendWouldInOrder(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	type got struct {
		h    core.Header
		data string
	}
	var frames []got
	mods[1].Register(core.TypeEager, func(h *core.Header, b []byte) { frames = append(frames, got{*h, string(b)}) })
	ep, _ := mods[0].Endpoint(1)
	es := ep.(core.Eager)
	if es.SendEager(1, 2, 0, []byte("early")) {
		t.Fatal("SendEager took the first frame to a peer, before the sender is announced")
	}
	h := core.Header{Type: core.TypeEager, Src: 0, Context: 1, Tag: 2}
	ep.Send(h, nil, []byte("a"), 0)
	if !es.SendEager(1, -3, 1, []byte("b")) {
		t.Fatal("SendEager declined a small frame to an announced peer")
	}
	if es.SendEager(1, 2, 2, make([]byte, mods[0].fboxMax)) {
		t.Fatal("SendEager took a frame too long for the fast box")
	}
	h.PSN = 2
	ep.Send(h, nil, make([]byte, 2048), 0) // a fragment on the FIFO
	es.SendEager(1, 2, 3, []byte("d"))
	progressUntil(t, mods, func() bool { return len(frames) == 4 })
	want := []got{
		{core.Header{Type: core.TypeEager, Context: 1, Tag: 2, PSN: 0, Length: 1}, "a"},
		{core.Header{Type: core.TypeEager, Context: 1, Tag: -3, PSN: 1, Length: 1}, "b"},
		{core.Header{Type: core.TypeEager, Context: 1, Tag: 2, PSN: 2, Length: 2048}, string(make([]byte, 2048))},
		{core.Header{Type: core.TypeEager, Context: 1, Tag: 2, PSN: 3, Length: 1}, "d"},
	}
	for i := range want {
		if frames[i] != want[i] {
			t.Fatalf("frame %d: %+v %q, want %+v %q", i, frames[i].h, frames[i].data, want[i].h, want[i].data)
		}
	}
	n := 0
	for es.SendEager(1, 2, uint32(4+n), []byte("fill")) {
		n++
	}
	if n == 0 || len(frames) != 4 {
		t.Fatalf("the box took %d frames before it was full", n)
	}
	mods[0].peers[1].dead = core.ErrPeerLost
	progressUntil(t, mods, func() bool { return len(frames) == 4+n })
	if es.SendEager(1, 2, 0, []byte("x")) {
		t.Fatal("SendEager sent to a dead peer")
	}
}

// SendEager's write in place leaves the ring as Send's put does — the
// header, a payload of every length around the two-word copy, the zeroed
// header after the slot — and so does its way through put when the slot
// does not fit before the end of the ring or the read position it last
// saw leaves too little room. Both ways are taken.
func TestSendEagerWritesTheSlotsSendWrites(t *testing.T) {
	small := map[string]string{"fastbox_size": "4KiB", "fastbox_max": "1KiB"} // many ends of the ring
	viaSend, _ := openRanks(t, 2, small)
	viaEager, _ := openRanks(t, 2, small)
	var got [2]int
	for i, mods := range [][]*Module{viaSend, viaEager} {
		mods[1].Register(core.TypeEager, func(*core.Header, []byte) { got[i]++ })
	}
	epS, _ := viaSend[0].Endpoint(1)
	epE, _ := viaEager[0].Endpoint(1)
	es := epE.(core.Eager)
	first := core.Header{Type: core.TypeEager, Context: 1}
	epS.Send(first, nil, nil, 0) // announces the sender, as SendEager needs
	epE.Send(first, nil, nil, 0)
	o := &viaEager[0].peers[1].out
	inPlace, viaPut := 0, 0
	for i := 1; i < 4*int(o.size)/64; i++ {
		msg := make([]byte, i%41)
		for j := range msg {
			msg[j] = byte(i*7 + j)
		}
		need := slotBytes(core.HeaderSize + len(msg))
		if o.tail&o.mask+need <= o.size && o.size-(o.tail-o.head) >= need+cacheLine {
			inPlace++
		} else {
			viaPut++
		}
		h := core.Header{Type: core.TypeEager, Context: 1, Tag: int32(i % 5), PSN: uint32(i)}
		if err := epS.Send(h, nil, msg, 0); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		if !es.SendEager(1, h.Tag, h.PSN, msg) {
			t.Fatalf("SendEager %d declined", i)
		}
		if a, b := viaSend[1].rx.in[0].ring, viaEager[1].rx.in[0].ring; !bytes.Equal(a, b) {
			k := 0
			for a[k] == b[k] {
				k++
			}
			t.Fatalf("frame %d of %d bytes: the rings differ from byte %d", i, len(msg), k)
		}
		if i%3 == 0 { // the receivers lag, so that the senders' read positions go stale
			viaSend[1].Progress()
			viaEager[1].Progress()
			if got[0] != got[1] {
				t.Fatalf("frame %d: %d frames delivered from Send, %d from SendEager", i, got[0], got[1])
			}
		}
	}
	if inPlace == 0 || viaPut == 0 {
		t.Fatalf("%d frames written in place, %d through put: want both ways taken", inPlace, viaPut)
	}
}

// TakeEager takes the pair's next frame from the fast box when it is the
// in-order EAGER frame asked for and passes the filter, all the way round
// the ring and past its end-of-ring markers; it keeps in place a frame
// whose tag does not pass or that is too long for the buffer, showing its
// tag and length, and leaves another context, another PSN and a frame of
// the FIFO's turn to Progress.
func TestTakeEagerTakesTheNextEagerFrameInPlace(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	delivered := 0
	mods[1].Register(core.TypeEager, func(*core.Header, []byte) { delivered++ })
	ep, _ := mods[0].Endpoint(1)
	es := ep.(core.Eager)
	back, _ := mods[1].Endpoint(0)
	er := back.(core.Eager)
	buf := make([]byte, 64)
	if _, _, res := er.TakeEager(1, 0, 2, 0, buf); res != core.EagerNone {
		t.Fatalf("TakeEager from an empty box = %v", res)
	}
	ep.Send(core.Header{Type: core.TypeEager, Context: 1, Tag: 2}, nil, []byte("first"), 0)
	if _, _, res := er.TakeEager(1, 0, 2, 0, buf); res != core.EagerTaken || string(buf[:5]) != "first" {
		t.Fatalf("TakeEager of the first frame = %v %q", res, buf[:5])
	}
	psn := uint32(1)
	for i := range 3 * int(mods[1].rx.in[0].size) / 64 { // several times round the ring, slots of 48 to 80 bytes
		msg := make([]byte, 1+i%40) // every length around the two-word copy's 8 to 16
		for j := range msg {
			msg[j] = byte(i*7 + j)
		}
		if !es.SendEager(1, int32(i%5), psn, msg) {
			t.Fatalf("SendEager %d declined", i)
		}
		if tag, n, res := er.TakeEager(1, psn, 7, 0, buf); res != core.EagerKept || tag != int32(i%5) || n != len(msg) {
			t.Fatalf("TakeEager for another tag = %d %d %v, want %d %d kept", tag, n, res, i%5, len(msg))
		}
		if _, n, res := er.TakeEager(1, psn, 0, core.IgnoreTag, buf[:len(msg)-1]); res != core.EagerKept || n != len(msg) {
			t.Fatalf("TakeEager into a short buffer = %d %v", n, res)
		}
		if tag, n, res := er.TakeEager(1, psn, 0, core.IgnoreTag, buf); res != core.EagerTaken || tag != int32(i%5) || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("TakeEager %d = %d %q %v, want %q", i, tag, buf[:n], res, msg)
		}
		psn++
	}
	es.SendEager(2, 0, psn, []byte("ctx"))
	if _, _, res := er.TakeEager(1, psn, 0, core.IgnoreTag, buf); res != core.EagerOther {
		t.Fatalf("TakeEager of another context = %v", res)
	}
	if _, _, res := er.TakeEager(2, psn+1, 0, core.IgnoreTag, buf); res != core.EagerOther {
		t.Fatalf("TakeEager of another PSN = %v", res)
	}
	mods[1].Progress()
	ep.Send(core.Header{Type: core.TypeEager, Context: 1, PSN: psn + 1}, nil, make([]byte, mods[0].fboxMax), 0) // a fragment on the FIFO
	es.SendEager(1, 0, psn+2, []byte("after"))
	if _, _, res := er.TakeEager(1, psn+2, 0, core.IgnoreTag, buf); res != core.EagerNone {
		t.Fatalf("TakeEager of a frame behind one in the FIFO = %v", res)
	}
	progressUntil(t, mods, func() bool { return delivered == 3 })
}

// The filter compares the bits of the tag not set in the ignore mask, as
// FI_TAGGED does: a frame whose tag differs only in ignored bits passes,
// one that differs in a compared bit stays.
func TestTakeEagerComparesTheTagOutsideTheIgnoreMask(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	ep, _ := mods[0].Endpoint(1)
	es := ep.(core.Eager)
	back, _ := mods[1].Endpoint(0)
	er := back.(core.Eager)
	const sent = 0x1234
	buf := make([]byte, 8)
	ep.Send(core.Header{Type: core.TypeEager, Context: 1, Tag: sent}, nil, nil, 0) // announces the sender
	if _, _, res := er.TakeEager(1, 0, sent, 0, buf); res != core.EagerTaken {
		t.Fatalf("TakeEager of the first frame = %v", res)
	}
	for i, c := range []struct {
		tag    int32
		ignore uint32
		passes bool
	}{
		{sent, 0, true},
		{0x1200, 0x00ff, true},
		{0x1334, 0x00ff, false},
		{0x5234, 0xf000, true},
		{-1, 0xffff0000, false},
		{-7, core.IgnoreTag, true},
	} {
		psn := uint32(1 + i)
		if !es.SendEager(1, sent, psn, []byte{byte(i)}) {
			t.Fatalf("SendEager %d declined", i)
		}
		tag, n, res := er.TakeEager(1, psn, c.tag, c.ignore, buf)
		if want := map[bool]core.EagerResult{true: core.EagerTaken, false: core.EagerKept}[c.passes]; res != want || tag != sent || n != 1 {
			t.Fatalf("tag %#x ignore %#x on a frame of tag %#x: %#x %d %v, want %v", c.tag, c.ignore, sent, tag, n, res, want)
		}
		if core.TagPasses(sent, c.tag, c.ignore) != c.passes {
			t.Fatalf("TagPasses(%#x, %#x, %#x) = %v", sent, c.tag, c.ignore, !c.passes)
		}
		if !c.passes {
			er.TakeEager(1, psn, 0, core.IgnoreTag, buf)
		}
	}
}

// TakeEager gives consumed slots back to the sender lazily: not after
// every frame, but once a quarter of the ring is consumed, and whenever
// it finds nothing to take, so a receiver that waits has given back all.
func TestTakeEagerGivesSlotsBackWhenIdleOrAQuarterIsConsumed(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	ep, _ := mods[0].Endpoint(1)
	es := ep.(core.Eager)
	back, _ := mods[1].Endpoint(0)
	er := back.(core.Eager)
	in := &mods[1].rx.in[0]
	published := func() uint64 { return atomic.LoadUint64(in.headp) }
	ep.Send(core.Header{Type: core.TypeEager, Context: 1}, nil, []byte("first"), 0)
	buf := make([]byte, 64)
	psn := uint32(0)
	take := func() {
		t.Helper()
		if _, _, res := er.TakeEager(1, psn, 0, 0, buf); res != core.EagerTaken {
			t.Fatalf("TakeEager of frame %d = %v", psn, res)
		}
		psn++
	}
	take()
	start := published()
	for i := range 3 {
		if !es.SendEager(1, 0, psn+uint32(i), []byte("12345678")) {
			t.Fatalf("SendEager %d declined", i)
		}
	}
	for range 3 {
		take()
	}
	if got := published(); got != start {
		t.Fatalf("three frames consumed: published position moved from %d to %d, want it kept", start, got)
	}
	if _, _, res := er.TakeEager(1, psn, 0, 0, buf); res != core.EagerNone {
		t.Fatalf("TakeEager of an empty box = %v", res)
	}
	if got := published(); got != in.head {
		t.Fatalf("after a look that found nothing the published position is %d, want the read position %d", got, in.head)
	}
	// Without a look that finds nothing, a quarter of the ring consumed
	// is given back.
	mark := published()
	for in.head-mark < in.size/4 {
		if !es.SendEager(1, 0, psn, []byte("12345678")) {
			t.Fatalf("SendEager %d declined", psn)
		}
		take()
	}
	if got := published(); got != in.head {
		t.Fatalf("a quarter of the ring consumed: published %d, want %d", got, in.head)
	}
}

// A sender refused for want of a fragment learns that one came back from
// Replenished (core.Resources): the count stands while every fragment
// is in flight and the receiver has consumed none, and moves once the
// sender has taken one back. A frame small enough for the fast box, whose
// room the module does not watch, moves it at the refusal.
func TestReplenishedMovesWhenAFragmentComesBack(t *testing.T) {
	mods, _ := openRanks(t, 2, map[string]string{"fragments": "4"})
	got := 0
	mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { got++ })
	ep, _ := mods[0].Endpoint(1)
	repl := ep.(core.Resources)
	big := make([]byte, 16<<10) // beyond fastbox_max: a fragment
	sent := 0
	for ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, nil, big, 0) == nil {
		sent++
	}
	if sent != 4 {
		t.Fatalf("%d fragments sent before the first refusal, want 4", sent)
	}
	at := repl.Replenished()
	for range 10 {
		if err := ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, nil, big, 0); !errors.Is(err, core.ErrNoResources) {
			t.Fatalf("send with every fragment in flight: %v", err)
		}
		mods[0].Progress()
	}
	if r := repl.Replenished(); r != at {
		t.Fatalf("Replenished moved from %d to %d with no fragment back", at, r)
	}
	// Fill the fast box, so that a small frame is refused too.
	small := make([]byte, 64)
	for ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, nil, small, 0) == nil {
	}
	if r := repl.Replenished(); r == at {
		t.Fatal("a refused frame that fits the fast box left Replenished where it was")
	}
	at = repl.Replenished()
	for got < sent {
		mods[1].Progress()
	}
	if r := repl.Replenished(); r != at {
		t.Fatalf("Replenished moved before the sender took a fragment back")
	}
	mods[0].Progress()
	if r := repl.Replenished(); r == at {
		t.Fatal("the sender took its fragments back and Replenished stood still")
	}
	if err := ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, nil, big, 0); err != nil {
		t.Fatalf("send after the fragments came back: %v", err)
	}
}

// With copy_in = "stream" the sender writes fragments with non-temporal
// stores, and the receiver reads every byte of them as sent.
func TestStreamedFragmentsArriveWhole(t *testing.T) {
	if !canStream {
		t.Skip("no AVX2: copy_in = stream copies as cache does")
	}
	mods, _ := openRanks(t, 2, map[string]string{"copy_in": "stream"})
	if !mods[0].cfg.stream {
		t.Fatal("copy_in = stream did not reach the module")
	}
	var got [][]byte
	mods[1].Register(core.TypeUserBase, func(_ *core.Header, p []byte) { got = append(got, bytes.Clone(p)) })
	ep, _ := mods[0].Endpoint(1)
	var sent [][]byte
	for i, n := range []int{8 << 10, 32<<10 + 40, 60 << 10} {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(j*31 + i)
		}
		sent = append(sent, b)
		for ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, []byte("pre"), b, 0) != nil {
			mods[0].Progress()
			mods[1].Progress()
		}
	}
	progressUntil(t, mods, func() bool { return len(got) == len(sent) })
	for i := range sent {
		if want := append([]byte("pre"), sent[i]...); !bytes.Equal(got[i], want) {
			t.Errorf("fragment %d (%d bytes) arrived corrupt", i, len(sent[i]))
		}
	}
}
