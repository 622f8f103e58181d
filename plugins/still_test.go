package plugins

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	extolldynamic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
	"github.com/rs/zerolog"
)

// handLink hands every batch the proxy sends to the test, which answers
// each with the decisions it chooses.
type handLink struct {
	sent    chan []core.FlowEvent
	answers chan []core.FlowDecision
	seq     uint64
}

func (l *handLink) send(seq uint64, es []core.FlowEvent) error {
	l.sent <- append([]core.FlowEvent(nil), es...)
	return nil
}

func (l *handLink) recv(dst []core.FlowDecision) (uint64, []core.FlowDecision, error) {
	ds, ok := <-l.answers
	if !ok {
		return 0, dst, errors.New("closed")
	}
	l.seq++
	return l.seq, append(dst, ds...), nil
}

func (l *handLink) closeSend() {}

func (l *handLink) next(t testing.TB) []core.FlowEvent {
	t.Helper()
	select {
	case b := <-l.sent:
		return b
	case <-time.After(20 * time.Second):
		t.Fatal("no batch sent")
		return nil
	}
}

// newStillProxy runs a flow-control proxy that takes the plugin's quiet
// statements, over a handLink; it stops when the test ends.
func newStillProxy(t testing.TB) (*proxy[core.FlowEvent, core.FlowDecision], *handLink, *proxyStats) {
	l := &handLink{sent: make(chan []core.FlowEvent, maxInflight), answers: make(chan []core.FlowDecision)}
	stats := newProxyStats(nil, "t")
	px := newProxy[core.FlowEvent, core.FlowDecision]("test policy", zerolog.Nop(), time.Hour, false, l, stats)
	px.stillOps = flowStill
	px.run()
	t.Cleanup(func() { px.close(); close(l.answers); px.wait() })
	return px, l, stats
}

// A FlowQuiet in the answer to a batch keeps the points it names from the
// plugin — but only while nothing else has happened since that batch: an
// event of another sort queued before the statement arrives, or after it,
// ends it, and every event from then on goes. The statements are the
// host's; the mechanism never sees them.
func TestQuietPointsStayHomeUntilSomethingElseHappens(t *testing.T) {
	px, l, stats := newStillProxy(t)

	mon := core.FlowEvent{Kind: core.FlowMonitor, Peer: 1, Quota: 40}
	other := core.FlowEvent{Kind: core.FlowMonitor, Peer: 0, Quota: 2}
	quiet := core.FlowDecision{Kind: core.FlowQuiet, Peer: 1, Value: 40}
	var out []core.FlowDecision
	answer := func(ds ...core.FlowDecision) {
		t.Helper()
		acked := px.ackedSeq.Load()
		l.answers <- ds
		waitFor(t, "the answer", 20*time.Second, func() bool { return px.ackedSeq.Load() > acked })
		out = px.Observe(nil, out)
	}

	px.Observe([]core.FlowEvent{mon}, nil)
	if b := l.next(t); len(b) != 1 {
		t.Fatalf("first batch %v", b)
	}
	// Sender 0 reaches a point while the statement is on its way: the
	// statement predates it and does not hold.
	px.Observe([]core.FlowEvent{other}, nil)
	answer(quiet)
	if b := l.next(t); len(b) != 1 || b[0] != other {
		t.Fatalf("second batch %v, want %v", b, other)
	}
	px.Observe([]core.FlowEvent{mon}, nil) // waits for the answer in flight
	// The answer to the second batch holds: the point that waited, and
	// those after it, stay home; another quota does not.
	answer(quiet, core.FlowDecision{Kind: core.FlowSetQuota, Peer: 1, Value: 40})
	px.Observe([]core.FlowEvent{mon, mon}, nil)
	px.Observe([]core.FlowEvent{mon}, nil)
	if n := stats.stilled.Load(); n != 4 {
		t.Fatalf("%d points kept from the plugin, want 4", n)
	}
	moved := mon
	moved.Quota = 41
	px.Observe([]core.FlowEvent{mon, moved, mon}, nil)
	if b := l.next(t); len(b) != 2 || b[0] != moved || b[1] != mon {
		t.Fatalf("after another event: batch %v, want %v then %v", b, moved, mon)
	}
	answer()
	px.Observe([]core.FlowEvent{mon}, nil)
	if b := l.next(t); len(b) != 1 {
		t.Fatalf("an answer without the statement ends it: batch %v", b)
	}
	answer()
	if len(out) != 1 || out[0].Kind != core.FlowSetQuota {
		t.Fatalf("the mechanism got %v, want the one SetQuota", out)
	}
	if n := stats.stilled.Load(); n != 5 {
		t.Fatalf("%d points kept from the plugin, want 5", n)
	}
}

// recordExtoll drives a built-in extoll_dynamic as a receiver's engine
// would, applying its decisions lag batches late (as a plugin's arrive)
// and answering every FlowSetQuota with a FlowQuota; the activity moves
// between senders by phases, with long settled stretches. It returns the
// event batches and the decisions the built-in made for them.
func recordExtoll(p *extolldynamic.Policy, info core.FlowInfo, s core.FlowSetup) ([][]core.FlowEvent, []core.FlowDecision) {
	quota := make([]int32, info.Ranks)
	for i := range quota {
		quota[i] = int32(s.Quota)
	}
	const lag = 2
	var (
		batches  [][]core.FlowEvent
		made     []core.FlowDecision
		inflight [][]core.FlowDecision
		answers  []core.FlowEvent
	)
	phases := []struct {
		busy  []int32
		steps int
	}{{[]int32{0}, 300}, {[]int32{0, 1}, 150}, {[]int32{1}, 300}, {[]int32{2, 0}, 100}, {[]int32{0}, 400}}
	for _, ph := range phases {
		for step := range ph.steps {
			b := answers
			answers = nil
			for i, s := range ph.busy {
				if (step+i)%len(ph.busy) == 0 || step%3 == 0 {
					b = append(b, core.FlowEvent{Kind: core.FlowMonitor, Peer: s, Quota: quota[s], Value: int64(step % 5)})
				}
			}
			out := p.Observe(b, nil)
			batches = append(batches, b)
			made = append(made, out...)
			inflight = append(inflight, out)
			for len(inflight) > lag {
				for _, d := range inflight[0] {
					if d.Kind == core.FlowSetQuota {
						quota[d.Peer] = int32(d.Value)
						answers = append(answers, core.FlowEvent{Kind: core.FlowQuota, Peer: d.Peer, Quota: quota[d.Peer]})
					}
				}
				inflight = inflight[1:]
			}
		}
	}
	return batches, made
}

func withoutQuiet(ds []core.FlowDecision) []core.FlowDecision {
	var out []core.FlowDecision
	for _, d := range ds {
		if d.Kind != core.FlowQuiet {
			out = append(out, d)
		}
	}
	return out
}

// extoll_dynamic as a plugin process decides exactly as built in given the
// same events, although the host keeps the points the plugin stated quiet
// from it — most of a settled stretch — and the mechanism never sees a
// statement.
func TestExtollDynamicDecidesAsAPluginAsBuiltIn(t *testing.T) {
	bin := testBin("extoll_dynamic")
	schema, err := Schema(core.KindFlowControl, "", bin)
	if err != nil {
		t.Fatal(err)
	}
	params, err := core.NewParams(schema)
	if err != nil {
		t.Fatal(err)
	}
	info := core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: 3, Senders: 3, BufferSize: 64, Buffers: 3 * 58}
	builtin := &extolldynamic.Policy{CreditSlots: params.Int("credit_slots"), MaxQuota: params.Int("max_quota")}
	bs, err := builtin.Setup(info)
	if err != nil {
		t.Fatal(err)
	}
	batches, want := recordExtoll(builtin, info, bs)

	m := core.NewMetrics()
	log, _ := testLogger()
	p, err := Open(context.Background(), Block{Kind: core.KindFlowControl, Path: bin, Params: params, Pos: "test.hcl:1"}, Options{Log: log, Metrics: m, Deadline: testDeadline})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fc := p.FlowControl()
	ps, err := fc.Setup(info)
	if err != nil {
		t.Fatal(err)
	}
	if ps != bs {
		t.Fatalf("setup as a plugin %+v, built in %+v", ps, bs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []core.FlowDecision
	fed := 0
	for i, b := range batches {
		got = fc.Observe(b, got)
		fed += len(b)
		// Waiting for the answers now and then lets statements arrive
		// before the points they name, as they do in a job.
		if i%4 == 0 {
			if err := p.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got = fc.Observe(nil, got)
	for _, d := range got {
		if d.Kind == core.FlowQuiet {
			t.Fatalf("a statement reached the mechanism: %+v", d)
		}
	}
	if w := withoutQuiet(want); !reflect.DeepEqual(got, w) {
		t.Fatalf("as a plugin %d decisions, built in %d\nplugin:   %v\nbuilt in: %v", len(got), len(w), got, w)
	}
	sent, still := m.Counter("plugin.extoll_dynamic.events").Load(), m.Counter("plugin.extoll_dynamic.events_still").Load()
	t.Logf("%d events fed, %d sent to the plugin, %d kept back; %d decisions", fed, sent, still, len(got))
	if still < int64(fed)/4 || sent+still != int64(fed) {
		t.Fatalf("%d events fed, %d sent, %d kept back: the settled stretches' points should mostly stay home", fed, sent, still)
	}
}

// Sync waits for the events observed before it. Those a statement then
// keeps from the plugin are done with — no batch will carry them — so
// Sync returns: it must not wait for the batch they would have made.
func TestSyncReturnsWhenTheStatementKeepsThePendingPointsHome(t *testing.T) {
	px, l, stats := newStillProxy(t)
	mon := core.FlowEvent{Kind: core.FlowMonitor, Peer: 1, Quota: 40}
	px.Observe([]core.FlowEvent{mon}, nil)
	l.next(t)
	px.Observe([]core.FlowEvent{mon}, nil) // pending: the first batch is in flight
	synced := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		synced <- px.sync(ctx)
	}()
	// Sync is waiting for the pending point's batch; the answer to the
	// first states that such points change nothing.
	time.Sleep(50 * time.Millisecond)
	l.answers <- []core.FlowDecision{{Kind: core.FlowQuiet, Peer: 1, Value: 40}}
	if err := <-synced; err != nil {
		t.Fatalf("sync after the pending point was kept home: %v", err)
	}
	if n := stats.stilled.Load(); n != 1 {
		t.Fatalf("%d points kept home, want the pending one", n)
	}
}
