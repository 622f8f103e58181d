package sm

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// doneErr counts completions and keeps the last error.
type doneErr struct {
	n   int
	err error
}

func (d *doneErr) RDMADone(_ *core.RDMAOp, err error) { d.n++; d.err = err }

// coopPair opens a reader (rank 0) and a sender (rank 1) with CMA, and a
// get of n bytes of a buffer the sender registered.
func coopPair(t *testing.T, n int, params map[string]string) (mods []*Module, src, dst []byte, op *core.RDMAOp, done *doneErr) {
	t.Helper()
	if params == nil {
		params = map[string]string{}
	}
	params["single_copy"] = "cma"
	mods, _ = openRanks(t, 2, params)
	src = make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + i>>12)
	}
	rg, err := mods[1].RegisterMem(src, core.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	// The sender connects to the reader as it would when it sent the START.
	if _, err := mods[1].Endpoint(0); err != nil {
		t.Fatal(err)
	}
	dst = make([]byte, n)
	done = &doneErr{}
	op = &core.RDMAOp{Local: dst, Remote: rg.Key(), Done: done}
	return mods, src, dst, op, done
}

func getOp(t *testing.T, m *Module, peer int, op *core.RDMAOp) {
	t.Helper()
	ep, err := m.Endpoint(peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.(core.RDMA).Get(op); err != nil {
		t.Fatal(err)
	}
}

// While both poll, a large get is read from both ends: the reader's
// Progress takes a chunk from the back, the sender's one from the front,
// and the bytes are the sender's.
func TestACMAReadGoesFromBothEndsWhileBothPoll(t *testing.T) {
	const n = 1 << 20
	mods, src, dst, op, done := coopPair(t, n, nil)
	getOp(t, mods[0], 1, op)
	progressUntil(t, mods, func() bool { return done.n == 1 })
	if done.err != nil {
		t.Fatal(done.err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("the bytes read are not the sender's")
	}
	helped := mods[1].st.cmaHelpBytes
	if helped == 0 || helped >= n {
		t.Fatalf("the sender wrote %d of %d bytes; want a share, not none nor all", helped, n)
	}
	if mods[0].st.cmaGets != 1 || mods[0].st.cmaBytes != n {
		t.Fatalf("reader counted %d gets, %d bytes", mods[0].st.cmaGets, mods[0].st.cmaBytes)
	}
	if len(mods[0].coop.free) != coopRecs || len(mods[0].coop.gets) != 0 {
		t.Fatalf("after the get: %d records free, %d gets in flight", len(mods[0].coop.free), len(mods[0].coop.gets))
	}
}

// A sender that does not poll costs nothing: the reader reads it all, and
// when the sender comes to the record late it writes nothing — not even
// after its buffer changed.
func TestASenderThatComesLateWritesNothing(t *testing.T) {
	const n = 512 << 10
	mods, src, dst, op, done := coopPair(t, n, nil)
	getOp(t, mods[0], 1, op)
	progressUntil(t, mods[:1], func() bool { return done.n == 1 })
	if done.err != nil || !bytes.Equal(dst, src) {
		t.Fatalf("get alone: %v, equal %v", done.err, bytes.Equal(dst, src))
	}
	want := bytes.Clone(dst)
	for i := range src {
		src[i] ^= 0xff
	}
	for range 100 {
		mods[1].Progress()
	}
	if mods[1].st.cmaHelpBytes != 0 || !bytes.Equal(dst, want) {
		t.Fatalf("a late sender wrote %d bytes into a finished get", mods[1].st.cmaHelpBytes)
	}
	if len(mods[1].coop.helps) != 0 {
		t.Fatalf("the sender still holds %d records", len(mods[1].coop.helps))
	}
}

// single_copy_helper = false: the reader reads alone; no descriptor
// reaches the sender.
func TestWithoutTheHelperTheReaderReadsAlone(t *testing.T) {
	const n = 1 << 20
	mods, src, dst, op, done := coopPair(t, n, map[string]string{"single_copy_helper": "false"})
	getOp(t, mods[0], 1, op)
	progressUntil(t, mods, func() bool { return done.n == 1 })
	if done.err != nil || !bytes.Equal(dst, src) {
		t.Fatalf("get: %v, equal %v", done.err, bytes.Equal(dst, src))
	}
	if mods[1].st.cmaHelpBytes != 0 || mods[1].st.fifoRecvs != 0 {
		t.Fatalf("the sender wrote %d bytes and took %d descriptors", mods[1].st.cmaHelpBytes, mods[1].st.fifoRecvs)
	}
}

// The sender copies only from a region it has registered and not
// released: a record naming another key (a get of a buffer the sender
// has let go) gets no help, and the reader reads it alone.
func TestTheSenderHelpsOnlyFromALiveRegion(t *testing.T) {
	const n = 1 << 20
	mods, src, dst, op, done := coopPair(t, n, nil)
	for _, r := range mods[1].rdma.live {
		mods[1].DeregisterMem(r)
	}
	getOp(t, mods[0], 1, op)
	progressUntil(t, mods, func() bool { return done.n == 1 })
	if done.err != nil || !bytes.Equal(dst, src) {
		t.Fatalf("get: %v, equal %v", done.err, bytes.Equal(dst, src))
	}
	if mods[1].st.cmaHelpBytes != 0 {
		t.Fatalf("the sender wrote %d bytes from a released region", mods[1].st.cmaHelpBytes)
	}
}

// claimAsTheSender claims the front chunk of m's first get as the sender
// would, without writing it, and returns the get.
func claimAsTheSender(t *testing.T, m *Module) coopGet {
	t.Helper()
	g := m.coop.gets[0]
	claim := m.seg.u64(g.rec + coopOffClaim)
	gen, lo, hi := coopSplit(atomic.LoadUint64(claim))
	if !atomic.CompareAndSwapUint64(claim, coopWord(gen, lo, hi), coopWord(gen, lo+1, hi)) {
		t.Fatal("claim word moved")
	}
	return g
}

// The reader completes a get only when the chunks the sender claimed are
// written; if the sender is lost meanwhile, the get fails instead of
// waiting for ever.
func TestAGetWaitsForTheSendersClaimAndFailsWhenItIsLost(t *testing.T) {
	const n = 1 << 20
	mods, _, _, op, done := coopPair(t, n, nil)
	getOp(t, mods[0], 1, op)
	claimAsTheSender(t, mods[0])
	for range 1000 {
		mods[0].Progress()
	}
	if done.n != 0 {
		t.Fatalf("the get completed (%v) with the sender's chunk not written", done.err)
	}
	mods[0].failPeer(1, core.ErrPeerLost)
	mods[0].Progress()
	if done.n != 1 || !errors.Is(done.err, core.ErrPeerLost) {
		t.Fatalf("after the sender was lost: %d completions, %v", done.n, done.err)
	}
	if len(mods[0].coop.free) != coopRecs {
		t.Fatalf("%d records free after the failed get", len(mods[0].coop.free))
	}
}

// A sender that took a chunk and could not write it says so, and the
// reader reads the sender's share itself: the get holds the sender's
// bytes and succeeds.
func TestAChunkTheSenderCouldNotWriteIsReadAgain(t *testing.T) {
	const n = 1 << 20
	mods, src, dst, op, done := coopPair(t, n, nil)
	getOp(t, mods[0], 1, op)
	g := claimAsTheSender(t, mods[0])
	atomic.StoreUint32(mods[0].seg.u32(g.rec+coopOffFail), 1)
	atomic.AddUint64(mods[0].seg.u64(g.rec+coopOffSent), g.chunk)
	progressUntil(t, mods[:1], func() bool { return done.n == 1 })
	if done.err != nil || !bytes.Equal(dst, src) {
		t.Fatalf("get: %v, equal %v", done.err, bytes.Equal(dst, src))
	}
}

// A read from both ends moves only inside Progress, so a rank that arms
// its notifier with one in flight is woken at once rather than left
// asleep on a read that nothing advances.
func TestArmWithAReadInFlightNotifiesAtOnce(t *testing.T) {
	mods, _, _, op, _ := coopPair(t, 1<<20, nil)
	ch := mods[0].Notify()
	getOp(t, mods[0], 1, op)
	if len(mods[0].coop.gets) != 1 {
		t.Fatalf("%d reads in flight, want 1", len(mods[0].coop.gets))
	}
	mods[0].Arm()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification for a rank armed with a read in flight")
	}
}

// A descriptor naming a place among the records that is not a record is a
// bad frame.
func TestADescriptorBetweenRecordsIsBad(t *testing.T) {
	mods, _ := openRanks(t, 2, map[string]string{"single_copy": "cma"})
	ep, _ := mods[0].Endpoint(1)
	p := ep.(*peer)
	p.fifo.push(makeDesc(0, mods[0].seg.lay.coopOff+8))
	mods[1].Progress()
	if !mods[1].rx.rxDead[0] || mods[1].st.badFrames != 1 {
		t.Fatalf("rank 0 dead %v, bad frames %d", mods[1].rx.rxDead[0], mods[1].st.badFrames)
	}
}

// Many gets in flight at once (osu bw's window): the reader reads the
// newest, the sender writes the oldest; each get gets its own bytes.
func TestManyGetsInFlightEachGetTheirBytes(t *testing.T) {
	const n, k = 64 << 10, 16
	mods, src, _, _, _ := coopPair(t, n*k, nil)
	rg := mods[1].rdma.live[0]
	done := &doneErr{}
	dsts := make([][]byte, k)
	for i := range k {
		dsts[i] = make([]byte, n)
		getOp(t, mods[0], 1, &core.RDMAOp{Local: dsts[i], Remote: rg.Key(), Offset: uint64(i * n), Done: done})
	}
	progressUntil(t, mods, func() bool { return done.n == k })
	if done.err != nil {
		t.Fatal(done.err)
	}
	for i := range k {
		if !bytes.Equal(dsts[i], src[i*n:(i+1)*n]) {
			t.Fatalf("get %d holds the wrong bytes", i)
		}
	}
	if h := mods[1].st.cmaHelpBytes; h == 0 || h >= n*k {
		t.Fatalf("the sender wrote %d of %d bytes", h, n*k)
	}
}

func TestCoopChunk(t *testing.T) {
	for _, c := range []struct{ n, want uint64 }{
		{16 << 10, 64 << 10}, {64 << 10, 64 << 10}, {256 << 10, 64 << 10}, {512 << 10, 128 << 10},
		{1 << 20, 256 << 10}, {4 << 20, 512 << 10}, {64 << 20, 512 << 10}, {1<<20 + 4096, 256 << 10},
	} {
		if got := coopChunk(c.n); got != c.want {
			t.Errorf("coopChunk(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
