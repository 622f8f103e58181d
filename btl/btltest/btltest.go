package btltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/rs/zerolog"
)

// Config says which transport to test and how to open it.
type Config struct {
	// Component is the registered BTL's name.
	Component string
	// Instance is the block's second label, if the transport needs one.
	Instance string
	// Params override the component's defaults, in textual form.
	Params map[string]string
	// Kill makes the process behind m look dead to its peers (close its
	// connections without a goodbye, mark its segment failed). Nil skips
	// the peer-loss test.
	Kill func(m core.Module)
	// Timeout bounds every wait; 0 means 30 s.
	Timeout time.Duration
	// NoAllocCheck skips the zero-allocation test (for example for a
	// transport whose software device allocates by design).
	NoAllocCheck bool
	// Loopback says the transport reaches only the rank itself (btl/self):
	// every test's frames then go from a rank to itself, and the tests
	// that need a second party (back-pressure, a dead peer) are skipped.
	Loopback bool
	// Variants, if any, run the whole suite once each, as subtests named
	// after them: the transport's configurations worth checking (tiny
	// rings, another wire, no RDMA).
	Variants []Variant
}

// Variant is one configuration of the transport under test.
type Variant struct {
	Name string
	// Params are laid over Config.Params.
	Params map[string]string
	// NoAllocCheck skips the zero-allocation test in this variant only.
	NoAllocCheck bool
}

// frameType is the type the suite's frames use: the first one left to
// extensions and tests.
const frameType = core.TypeUserBase

// Run runs the whole suite as subtests of t, once per variant if there
// are any.
func Run(t *testing.T, cfg Config) {
	if len(cfg.Variants) > 0 {
		for _, v := range cfg.Variants {
			c := cfg
			c.Variants, c.Params = nil, map[string]string{}
			maps.Copy(c.Params, cfg.Params)
			maps.Copy(c.Params, v.Params)
			c.NoAllocCheck = cfg.NoAllocCheck || v.NoAllocCheck
			t.Run(v.Name, func(t *testing.T) { Run(t, c) })
		}
		return
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if _, ok := core.Lookup(core.KindBTL, cfg.Component); !ok {
		t.Fatalf("btltest: no BTL component %q is registered (missing import?)", cfg.Component)
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Config)
	}{
		{"AttributesDescribeAUsableModule", testAttrs},
		{"EndpointsExistForEveryRankAndNoOther", testEndpoints},
		{"HandlersRegisterOncePerValidType", testRegister},
		{"EverySizeUpToMaxSendSizeArrivesIntact", testEverySize},
		{"FramesFromOneSenderArriveInOrder", testOrder},
		{"HandlersMaySendFromInsideProgress", testReentrant},
		{"AStalledReceiverPushesBackAndNothingIsLost", testBackPressure},
		{"PutAndGetMoveDataAtAnyOffset", testRDMA},
		{"ASolicitedEventWakesAnArmedNotifier", testNotify},
		{"TheEagerPathKeepsThePairsOrderAndLeavesWhatItDoesNotTake", testEager},
		{"TheEagerPathStepsAsideInHandlersAndForALostPeer", testEagerAside},
		{"TheEagerPathAllocatesNothingEither", testEagerAllocs},
		{"ResourcesTellWhenARefusedSendMayPass", testResources},
		{"ADeadPeerIsReportedAndSendsToItFail", testPeerLost},
		{"ADisconnectedPeerLearnsOfIt", testDisconnect},
		{"CloseReleasesTheModule", testClose},
		{"TheEagerPathAllocatesNothing", testAllocs},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, cfg) })
	}
}

var jobSeq atomic.Int64

// job is n ranks of the transport in this process.
type job struct {
	t    testing.TB
	cfg  Config
	mods []core.Module
	eps  [][]core.Endpoint // [from][to], nil when unreachable
	// inProgress is set while the suite is inside a module's Progress, so
	// that callbacks can check where they run.
	inProgress atomic.Int32
	closed     []bool
}

func openJob(t testing.TB, cfg Config, n int) *job {
	t.Helper()
	comp, _ := core.Lookup(core.KindBTL, cfg.Component)
	boots := boot.Group(n, fmt.Sprintf("btltest%d-%d", os.Getpid(), jobSeq.Add(1)))
	j := &job{t: t, cfg: cfg, mods: make([]core.Module, n), closed: make([]bool, n)}
	t.Cleanup(j.closeAll)
	for r := range n {
		p, err := core.NewParams(comp.Params)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range cfg.Params {
			if err := p.SetText(k, v); err != nil {
				t.Fatalf("btltest: parameter %s: %v", k, err)
			}
		}
		mods, err := comp.OpenBTL(core.BTLEnv{
			Instance: cfg.Instance, Params: p, Boot: boots[r], Clock: core.SystemClock,
			Log: zerolog.Nop(), Metrics: core.NewMetrics(),
		})
		if err != nil {
			t.Fatalf("btltest: open rank %d: %v", r, err)
		}
		if len(mods) == 0 {
			t.Fatalf("btltest: rank %d opened no module", r)
		}
		j.mods[r] = mods[0]
		for _, extra := range mods[1:] {
			t.Cleanup(func() { extra.Close() })
		}
	}
	// Modules publish their addresses at open; they connect after a fence.
	var wg sync.WaitGroup
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	for r, b := range boots {
		wg.Go(func() { errs[r] = b.Fence(ctx) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("btltest: fence of rank %d: %v", r, err)
		}
	}
	j.eps = make([][]core.Endpoint, n)
	for from := range n {
		j.eps[from] = make([]core.Endpoint, n)
		for to := range n {
			ep, err := j.mods[from].Endpoint(to)
			switch {
			case err == nil:
				j.eps[from][to] = ep
			case errors.Is(err, core.ErrUnreachable) && (from == to) != cfg.Loopback:
				// A transport may leave a rank's own traffic to btl/self,
				// and btl/self reaches nobody else.
			default:
				t.Fatalf("btltest: rank %d: endpoint to rank %d: %v", from, to, err)
			}
		}
	}
	return j
}

// pair is the sender and the receiver of a test between two ranks: 0 and
// 1, or 0 and itself for a loopback transport.
func (j *job) pair() (tx, rx int) {
	if j.cfg.Loopback {
		return 0, 0
	}
	return 0, 1
}

// other is a rank r has an endpoint to: the next one, or r itself for a
// loopback transport.
func (j *job) other(r int) int {
	if j.cfg.Loopback {
		return r
	}
	return (r + 1) % len(j.mods)
}

func (j *job) closeAll() {
	for r, m := range j.mods {
		if m != nil && !j.closed[r] {
			j.closed[r] = true
			m.Close()
		}
	}
}

// progress polls every open module once.
func (j *job) progress() int {
	n := 0
	for r, m := range j.mods {
		if !j.closed[r] {
			j.inProgress.Store(1)
			n += m.Progress()
			j.inProgress.Store(0)
		}
	}
	return n
}

// until progresses every module until cond holds or the timeout passes.
func (j *job) until(what string, cond func() bool) {
	j.t.Helper()
	msgtest.Until(j.t, "btltest: "+what, j.cfg.Timeout, cond, j.progress)
}

// send retries on ErrNoResources, progressing in between.
func (j *job) send(from, to int, h core.Header, pre, data []byte) {
	j.t.Helper()
	ep := j.eps[from][to]
	deadline := time.Now().Add(j.cfg.Timeout)
	for {
		err := ep.Send(h, pre, data, 0)
		if err == nil {
			return
		}
		if !errors.Is(err, core.ErrNoResources) {
			j.t.Fatalf("btltest: send %d bytes from rank %d to rank %d: %v", len(pre)+len(data), from, to, err)
		}
		if j.progress() == 0 && time.Now().After(deadline) {
			j.t.Fatalf("btltest: send from rank %d to rank %d stayed out of resources for %v", from, to, j.cfg.Timeout)
		}
	}
}

// received is a frame a handler saw, copied.
type received struct {
	h       core.Header
	payload []byte
}

// record installs, on every rank, a handler that keeps copies of the
// suite's frames: got[rank] in arrival order.
func (j *job) record() [][]received {
	got := make([][]received, len(j.mods))
	for r, m := range j.mods {
		if err := m.Register(frameType, func(h *core.Header, p []byte) {
			got[r] = append(got[r], received{*h, append([]byte(nil), p...)})
		}); err != nil {
			j.t.Fatal(err)
		}
	}
	return got
}

func testAttrs(t *testing.T, cfg Config) {
	j := openJob(t, cfg, 2)
	for r, m := range j.mods {
		a := m.Attrs()
		switch {
		case a.Component != cfg.Component:
			t.Errorf("rank %d: Attrs.Component = %q, want %q", r, a.Component, cfg.Component)
		case a.Name == "":
			t.Errorf("rank %d: Attrs.Name is empty", r)
		case a.MaxSendSize <= 0:
			t.Errorf("rank %d: MaxSendSize = %d", r, a.MaxSendSize)
		case a.EagerLimit < 0 || a.EagerLimit > a.MaxSendSize:
			t.Errorf("rank %d: EagerLimit %d outside [0, MaxSendSize %d]", r, a.EagerLimit, a.MaxSendSize)
		case a.RndvEagerLimit < 0 || a.RndvEagerLimit > a.MaxSendSize:
			t.Errorf("rank %d: RndvEagerLimit %d outside [0, MaxSendSize %d]", r, a.RndvEagerLimit, a.MaxSendSize)
		case a.Bandwidth <= 0 || a.Latency <= 0:
			t.Errorf("rank %d: no performance model (bandwidth %v, latency %v)", r, a.Bandwidth, a.Latency)
		}
		// The RDMA set is whole: Put and Get on the endpoints, and the
		// module's registration for the memory they touch.
		_, reg := m.(core.Registrar)
		for to, ep := range j.eps[r] {
			if _, ok := ep.(core.RDMA); ok && !reg {
				t.Errorf("rank %d: the endpoint to rank %d is a core.RDMA, but the module is no core.Registrar", r, to)
			}
		}
		if ep := j.eps[r][j.other(r)]; ep != nil {
			t.Logf("rank %d: %s offers %v", r, a.Name, core.CapsOf(m, ep))
		}
	}
}

func testEndpoints(t *testing.T, cfg Config) {
	j := openJob(t, cfg, 3)
	for r, m := range j.mods {
		for _, bad := range []int{-1, 3, 1 << 20} {
			if _, err := m.Endpoint(bad); err == nil {
				t.Errorf("rank %d: Endpoint(%d) of a 3-rank job succeeded", r, bad)
			}
		}
		for to, ep := range j.eps[r] {
			if ep == nil {
				continue
			}
			if ep.Rank() != to {
				t.Errorf("rank %d: endpoint to %d says Rank() = %d", r, to, ep.Rank())
			}
			again, err := m.Endpoint(to)
			if err != nil || again.Rank() != to {
				t.Errorf("rank %d: second Endpoint(%d) = %v, %v", r, to, again, err)
			}
		}
	}
}

func testRegister(t *testing.T, cfg Config) {
	j := openJob(t, cfg, 2)
	m := j.mods[0]
	nop := func(*core.Header, []byte) {}
	if err := m.Register(frameType, nop); err != nil {
		t.Fatalf("Register(%v): %v", frameType, err)
	}
	if err := m.Register(frameType, nop); err == nil {
		t.Errorf("registering %v twice succeeded", frameType)
	}
	if err := m.Register(0, nop); err == nil {
		t.Error("registering type 0 succeeded")
	}
}

// sizesUpTo lists every size to 257, then each power of two and its
// neighbours, then max.
func sizesUpTo(max int) []int {
	var s []int
	for n := 0; n <= min(257, max); n++ {
		s = append(s, n)
	}
	for p := 512; p <= max; p *= 2 {
		for _, n := range []int{p - 1, p, p + 1} {
			if n <= max && n > 257 {
				s = append(s, n)
			}
		}
	}
	if s[len(s)-1] != max {
		s = append(s, max)
	}
	return s
}

func testEverySize(t *testing.T, cfg Config) {
	j := openJob(t, cfg, 2)
	tx, rx := j.pair()
	got := j.record()
	max := j.mods[tx].Attrs().MaxSendSize
	buf := make([]byte, max)
	for i, n := range sizesUpTo(max) {
		data := msgtest.Fill(buf[:n], uint64(n))
		split := min(n, i%41) // the pre segment: none, part, or all
		h := core.Header{Type: frameType, Context: uint32(n), Tag: int32(-n), PSN: uint32(i), Src: int32(tx)}
		j.send(tx, rx, h, data[:split], data[split:])
		j.until(fmt.Sprintf("the %d-byte frame", n), func() bool { return len(got[rx]) == i+1 })
		f := got[rx][i]
		want := h
		want.Length = uint32(n)
		if f.h.Type != want.Type || f.h.Src != want.Src || f.h.Context != want.Context || f.h.Tag != want.Tag ||
			f.h.PSN != want.PSN || f.h.Length != want.Length {
			t.Fatalf("%d-byte frame: header %+v, want %+v", n, f.h, want)
		}
		if !bytes.Equal(f.payload, data) {
			t.Fatalf("%d-byte frame (pre %d bytes): payload differs", n, split)
		}
	}
	err := j.eps[tx][rx].Send(core.Header{Type: frameType}, nil, make([]byte, max+1), 0)
	if err == nil || errors.Is(err, core.ErrNoResources) {
		t.Errorf("a frame of MaxSendSize+1 = %d bytes: Send returned %v, want an error that is not ErrNoResources", max+1, err)
	}
}

// randomSize picks sizes that mix every path a transport may have: tiny,
// around the eager limit, and large.
func randomSize(rng *rand.Rand, a core.Attrs) int {
	switch rng.IntN(4) {
	case 0, 1:
		return rng.IntN(65)
	case 2:
		return rng.IntN(max(a.EagerLimit, 1) + 1)
	}
	return rng.IntN(a.MaxSendSize + 1)
}

func testOrder(t *testing.T, cfg Config) {
	const perSender = 3000
	j := openJob(t, cfg, 3)
	got := j.record()
	rng := rand.New(rand.NewPCG(1, 2))
	a := j.mods[0].Attrs()
	buf := make([]byte, a.MaxSendSize)
	// Two senders to rank 1, or rank 1 to itself.
	senders := []int{0, 2}
	if cfg.Loopback {
		senders = []int{1}
	}
	sent := [3]int{}
	for done := false; !done; {
		done = true
		for _, from := range senders {
			if sent[from] == perSender {
				continue
			}
			// Bursts, so that frames queue behind each other.
			for k := rng.IntN(16); k >= 0 && sent[from] < perSender; k-- {
				seq := sent[from]
				n := randomSize(rng, a)
				data := msgtest.Fill(buf[:n], uint64(from)<<32|uint64(seq))
				j.send(from, 1, core.Header{Type: frameType, Src: int32(from), PSN: uint32(seq), Tag: int32(n)}, nil, data)
				sent[from]++
			}
			done = done && sent[from] == perSender
		}
		j.progress()
	}
	j.until("every frame", func() bool { return len(got[1]) == len(senders)*perSender })
	next := [3]int{}
	check := make([]byte, a.MaxSendSize)
	for _, f := range got[1] {
		from := int(f.h.Src)
		if f.h.PSN != uint32(next[from]) {
			t.Fatalf("from rank %d: frame %d arrived when %d was next", from, f.h.PSN, next[from])
		}
		if want := msgtest.Fill(check[:f.h.Tag], uint64(from)<<32|uint64(f.h.PSN)); !bytes.Equal(f.payload, want) {
			t.Fatalf("from rank %d: frame %d (%d bytes) has the wrong payload", from, f.h.PSN, f.h.Tag)
		}
		next[from]++
	}
}

func testReentrant(t *testing.T, cfg Config) {
	const rounds = 500
	j := openJob(t, cfg, 3)
	var hops [3]int
	var errs []error
	self := j.eps[2][2]
	// 0 -> 1 -> 2 -> (2 -> 2) -> 0 -> 1 ..., each hop sent by the handler of
	// the previous one; rank 2 also sends to itself when it can. A loopback
	// transport's ranks each send to themselves.
	for r, m := range j.mods {
		err := m.Register(frameType, func(h *core.Header, p []byte) {
			hops[r]++
			n := int(h.PSN)
			if n == rounds {
				return
			}
			to := (r + 1) % 3
			if r == 2 && self != nil && h.Src != 2 || cfg.Loopback {
				to = r
			}
			if err := j.eps[r][to].Send(core.Header{Type: frameType, Src: int32(r), PSN: uint32(n + 1)}, p, nil, 0); err != nil {
				errs = append(errs, fmt.Errorf("rank %d handler: send to %d: %w", r, to, err))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	tx, rx := j.pair()
	j.send(tx, rx, core.Header{Type: frameType, Src: int32(tx), PSN: 0}, []byte("token"), nil)
	j.until("the token's last hop", func() bool { return hops[0]+hops[1]+hops[2] == rounds+1 || len(errs) > 0 })
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
}

func testBackPressure(t *testing.T, cfg Config) {
	if cfg.Loopback {
		t.Skip("a rank sending to itself is its own receiver: one cannot stall without the other")
	}
	j := openJob(t, cfg, 2)
	got := j.record()
	a := j.mods[0].Attrs()
	for _, n := range []int{8, a.MaxSendSize} {
		got[1] = got[1][:0]
		ep := j.eps[0][1]
		data := make([]byte, n)
		sent := 0
		// Only the sender progresses: the receiver is busy elsewhere.
		var pushed error
		for bytesSent := 0; bytesSent < 1<<30 && sent < 1<<22; bytesSent += n + core.HeaderSize {
			err := ep.Send(core.Header{Type: frameType, Src: 0, PSN: uint32(sent)}, nil, msgtest.Fill(data, uint64(sent)), 0)
			if err != nil {
				pushed = err
				break
			}
			sent++
			j.mods[0].Progress()
		}
		if !errors.Is(pushed, core.ErrNoResources) {
			t.Fatalf("%d-byte frames: after %d sends to a receiver that does not progress, Send returned %v, want ErrNoResources", n, sent, pushed)
		}
		t.Logf("%d-byte frames: pushed back after %d frames", n, sent)
		// The receiver resumes; the rest goes through.
		total := sent + 200
		for ; sent < total; sent++ {
			j.send(0, 1, core.Header{Type: frameType, Src: 0, PSN: uint32(sent)}, nil, msgtest.Fill(data, uint64(sent)))
		}
		j.until("the frames sent under back-pressure", func() bool { return len(got[1]) == total })
		for i, f := range got[1] {
			if f.h.PSN != uint32(i) || !bytes.Equal(f.payload, msgtest.Fill(data, uint64(i))) {
				t.Fatalf("%d-byte frames: frame %d arrived as %d or with a wrong payload", n, i, f.h.PSN)
			}
		}
	}
}

// completer counts completions and checks they run inside Progress.
type completer struct {
	j    *job
	done int
	errs []error
}

func (c *completer) RDMADone(op *core.RDMAOp, err error) {
	if c.j.inProgress.Load() == 0 {
		c.errs = append(c.errs, errors.New("RDMADone ran outside Progress"))
	}
	c.done++
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

// register returns buf's key on m, through its Registrar if it has one.
func register(t *testing.T, m core.Module, buf []byte, acc core.Access) (core.Region, core.MemKey) {
	reg, ok := m.(core.Registrar)
	if !ok {
		return nil, core.MemKey{}
	}
	rg, err := reg.RegisterMem(buf, acc)
	if err != nil {
		t.Fatalf("RegisterMem(%d bytes): %v", len(buf), err)
	}
	t.Cleanup(func() { reg.DeregisterMem(rg) })
	return rg, rg.Key()
}

func testRDMA(t *testing.T, cfg Config) {
	j := openJob(t, cfg, 2)
	tx, rx := j.pair()
	if c := core.CapsOf(j.mods[tx], j.eps[tx][rx]); !c.Has(core.CapRDMA) {
		t.Skipf("%s offers no RDMA (%v)", cfg.Component, c)
	}
	rdma := j.eps[tx][rx].(core.RDMA)
	const remoteLen = 4<<20 + 123
	remote := make([]byte, remoteLen)
	_, rkey := register(t, j.mods[rx], remote, core.AccessRemoteRead|core.AccessRemoteWrite|core.AccessLocalWrite)
	local := make([]byte, remoteLen)
	lrg, _ := register(t, j.mods[tx], local, core.AccessLocalWrite|core.AccessRemoteRead)
	c := &completer{j: j}
	rng := rand.New(rand.NewPCG(3, 4))
	lens := []int{1, 7, 64, 4095, 4096, 65537, 1 << 20, remoteLen}
	issue := func(put bool, op *core.RDMAOp) {
		for {
			var err error
			if put {
				err = rdma.Put(op)
			} else {
				err = rdma.Get(op)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, core.ErrNoResources) {
				t.Fatalf("put=%v %d bytes at %d: %v", put, len(op.Local), op.Offset, err)
			}
			j.progress()
		}
	}
	for i, n := range lens {
		off := 0
		if n < remoteLen {
			off = rng.IntN(remoteLen - n)
		}
		msgtest.Fill(remote, uint64(i))
		clear(local)
		before := c.done
		issue(false, &core.RDMAOp{Local: local[:n], Region: lrg, Remote: rkey, Offset: uint64(off), Done: c})
		j.until("a get", func() bool { return c.done > before })
		if !bytes.Equal(local[:n], remote[off:off+n]) {
			t.Fatalf("get of %d bytes at offset %d: data differs", n, off)
		}
		msgtest.Fill(local[:n], uint64(i)+100)
		clear(remote)
		before = c.done
		issue(true, &core.RDMAOp{Local: local[:n], Region: lrg, Remote: rkey, Offset: uint64(off), Done: c})
		j.until("a put", func() bool { return c.done > before })
		if !bytes.Equal(remote[off:off+n], local[:n]) {
			t.Fatalf("put of %d bytes at offset %d: data differs", n, off)
		}
	}
	if len(c.errs) > 0 {
		t.Fatal(c.errs[0])
	}
	// Beyond the region: refused at once or failed at completion.
	before := c.done
	op := &core.RDMAOp{Local: local[:16], Region: lrg, Remote: rkey, Offset: remoteLen - 8, Done: c}
	if err := rdma.Get(op); err == nil {
		j.until("the out-of-range operation", func() bool { return c.done > before })
		if len(c.errs) == 0 {
			t.Error("an operation beyond the end of the remote region succeeded")
		}
	}
}

func testPeerLost(t *testing.T, cfg Config) {
	if cfg.Kill == nil || cfg.Loopback {
		t.Skip("no Kill hook for this transport, or no peer to lose")
	}
	j := openJob(t, cfg, 3)
	got := j.record()
	type loss struct {
		rank int
		err  error
	}
	var lost []loss
	j.mods[0].OnPeerLost(func(r int, err error) { lost = append(lost, loss{r, err}) })
	// Traffic first, so that the connection exists.
	j.send(1, 0, core.Header{Type: frameType, Src: 1}, []byte("hello"), nil)
	j.send(0, 1, core.Header{Type: frameType, Src: 0}, []byte("hello"), nil)
	j.until("the greetings", func() bool { return len(got[0]) == 1 && len(got[1]) == 1 })
	cfg.Kill(j.mods[1])
	j.closed[1] = true
	j.until("OnPeerLost", func() bool { return len(lost) > 0 })
	if lost[0].rank != 1 || !errors.Is(lost[0].err, core.ErrPeerLost) {
		t.Fatalf("OnPeerLost(%d, %v), want rank 1 and ErrPeerLost", lost[0].rank, lost[0].err)
	}
	deadline := time.Now().Add(cfg.Timeout)
	for {
		err := j.eps[0][1].Send(core.Header{Type: frameType, Src: 0}, []byte("anyone?"), nil, 0)
		if errors.Is(err, core.ErrPeerLost) {
			break
		}
		if err != nil && !errors.Is(err, core.ErrNoResources) {
			t.Fatalf("send to a lost peer: %v, want ErrPeerLost", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("sends to a lost peer keep succeeding")
		}
		j.progress()
	}
	// The survivors still talk.
	j.send(2, 0, core.Header{Type: frameType, Src: 2}, []byte("still here"), nil)
	j.until("a survivor's frame", func() bool { return len(got[0]) == 2 })
	for _, l := range lost {
		if l.rank != 1 {
			t.Errorf("rank %d reported lost too: %v", l.rank, l.err)
		}
	}
}

func testClose(t *testing.T, cfg Config) {
	j := openJob(t, cfg, 2)
	tx, rx := j.pair()
	ep := j.eps[tx][rx]
	for r, m := range j.mods {
		if err := m.Close(); err != nil {
			t.Errorf("rank %d: Close: %v", r, err)
		}
		j.closed[r] = true
		m.Close() // a second Close must not crash; its error is not checked
		if n := m.Progress(); n != 0 {
			t.Errorf("rank %d: Progress after Close handled %d events", r, n)
		}
	}
	if err := ep.Send(core.Header{Type: frameType}, []byte("late"), nil, 0); err == nil {
		t.Error("Send on a closed module succeeded")
	}
	if _, err := j.mods[tx].Endpoint(rx); err == nil {
		t.Error("Endpoint on a closed module succeeded")
	}
}

func testAllocs(t *testing.T, cfg Config) {
	if cfg.NoAllocCheck || raceEnabled {
		t.Skip("allocation counts are not meaningful here")
	}
	j := openJob(t, cfg, 2)
	tx, rx := j.pair()
	n := 0
	j.mods[rx].Register(frameType, func(*core.Header, []byte) { n++ })
	ep := j.eps[tx][rx]
	payload := make([]byte, 8)
	h := core.Header{Type: frameType, Src: int32(tx), Tag: 7}
	pingOnce := func() {
		want := n + 1
		for ep.Send(h, payload, nil, 0) != nil {
			j.progress()
		}
		for n < want {
			j.progress()
		}
	}
	for range 1000 {
		pingOnce()
	}
	if allocs := testing.AllocsPerRun(2000, pingOnce); allocs != 0 {
		t.Errorf("an 8-byte Send plus the Progress that delivers it allocates %.2f times", allocs)
	}
}

// waitNote waits for a notification, failing after the timeout.
func (j *job) waitNote(ch <-chan struct{}, what string) {
	j.t.Helper()
	select {
	case <-ch:
	case <-time.After(j.cfg.Timeout):
		j.t.Fatalf("btltest: no notification for %s within %v", what, j.cfg.Timeout)
	}
}

func testNotify(t *testing.T, cfg Config) {
	j := openJob(t, cfg, 2)
	tx, rx := j.pair()
	n, ok := j.mods[rx].(core.Notifier)
	if !ok {
		t.Skipf("%s has no notifier", cfg.Component)
	}
	got := j.record()
	ch := n.Notify()
	ep := j.eps[tx][rx]

	// A solicited frame wakes an armed receiver that is not polling.
	n.Arm()
	if err := ep.Send(core.Header{Type: frameType, Src: int32(tx)}, []byte("wake up"), nil, core.SendSolicited); err != nil {
		t.Fatal(err)
	}
	j.waitNote(ch, "a solicited frame")
	j.until("the solicited frame", func() bool { return len(got[rx]) == 1 })

	// Arming with an event already pending notifies at once.
	if err := ep.Send(core.Header{Type: frameType, Src: int32(tx)}, []byte("already here"), nil, core.SendSolicited); err != nil {
		t.Fatal(err)
	}
	n.Arm()
	j.waitNote(ch, "an event pending at Arm")
	j.until("the second frame", func() bool { return len(got[rx]) == 2 })

	// One Arm, one notification: without a new Arm, solicited frames do not
	// notify again (interrupt suppression), and the frames still arrive.
	// An Arm that found work only when it looked again after arming the
	// CQ (the arm-then-poll race of ibv_req_notify_cq) notified its
	// waiter itself and left the CQ armed: that arm may still fire once,
	// at the next solicited completion — verbs cannot take an arm back. So
	// the first round of quiet frames may bring one notification (the
	// conformance run saw it 1 time in 15, with explicit credit messages
	// completing on the receiver's CQ); the second may bring none.
	for round := range 2 {
		for range 3 {
			if err := ep.Send(core.Header{Type: frameType, Src: int32(tx)}, []byte("quiet"), nil, core.SendSolicited); err != nil {
				t.Fatal(err)
			}
		}
		j.until("the quiet frames", func() bool { return len(got[rx]) == 5+3*round })
		select {
		case <-ch:
			if round == 1 {
				t.Error("a notification came without an Arm")
			}
		default:
		}
	}

	// A solicited RDMA completion notifies its initiator.
	rdma, ok := j.eps[rx][tx].(core.RDMA)
	if !ok || !core.CapsOf(j.mods[rx], rdma.(core.Endpoint)).Has(core.CapRDMA) {
		return
	}
	remote := make([]byte, 4096)
	_, rkey := register(t, j.mods[tx], remote, core.AccessRemoteRead|core.AccessRemoteWrite)
	local := make([]byte, 4096)
	lrg, _ := register(t, j.mods[rx], local, core.AccessLocalWrite|core.AccessRemoteRead)
	c := &completer{j: j}
	op := &core.RDMAOp{Local: local, Region: lrg, Remote: rkey, Solicited: true, Done: c}
	n.Arm()
	if err := rdma.Get(op); err != nil {
		t.Fatal(err)
	}
	j.waitNote(ch, "a solicited RDMA completion")
	j.until("the RDMA completion", func() bool { return c.done == 1 })
}
