package plugins

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	extolldynamic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
	"github.com/rs/zerolog"
)

// echoPolicy is the in-process twin of testpolicy's echo mode: the same
// work, without the process boundary.
type echoPolicy struct{}

func (echoPolicy) Setup(core.FlowInfo) (core.FlowSetup, error) { return core.FlowSetup{}, nil }
func (echoPolicy) Observe(es []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	for _, e := range es {
		out = append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: e.Peer, Value: e.Value})
	}
	return out
}

// BenchmarkObserve is the caller's cost of one Observe call: a built-in
// answering 16 events, against a plugin policy's caller path — queueing 16
// events for the plugin, and polling with nothing arrived. The plugin
// side's goroutines are not running here, so that only the caller's work
// is timed (they would otherwise be outrun and events dropped); the
// process boundary's cost is in BenchmarkDecisionLatency and
// BenchmarkThroughput.
func BenchmarkObserve(b *testing.B) {
	events := make([]core.FlowEvent, 16)
	for i := range events {
		events[i] = core.FlowEvent{Kind: core.FlowActivity, Peer: int32(i % 4), Value: int64(i)}
	}
	out := make([]core.FlowDecision, 0, 1<<10)
	b.Run("builtin", func(b *testing.B) {
		var fc core.FlowControl = echoPolicy{}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			out = fc.Observe(events, out[:0])
		}
	})
	idle := func() *proxy[core.FlowEvent, core.FlowDecision] {
		return newProxy[core.FlowEvent, core.FlowDecision]("bench", zerolog.Nop(), time.Hour, false, newLoopLink(), newProxyStats(nil, "b"))
	}
	b.Run("plugin-queue", func(b *testing.B) {
		px := idle()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if i%1024 == 0 {
				b.StopTimer()
				px.pend = px.pend[:0] // what the sender goroutine would take
				b.StartTimer()
			}
			out = px.Observe(events, out[:0])
		}
	})
	b.Run("plugin-poll", func(b *testing.B) {
		px := idle()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			out = px.Observe(nil, out[:0])
		}
	})
}

// BenchmarkDecisionLatency is the time from an event handed to Observe to
// its decision coming out of Observe, through a real plugin process. The
// caller either spins on Observe(nil) or polls it every 50µs, as a
// progress loop that backs off does (core.PolicyPollInterval bounds the
// poll period at 1ms).
func BenchmarkDecisionLatency(b *testing.B) {
	for _, poll := range []time.Duration{0, 50 * time.Microsecond} {
		name := "spin"
		if poll > 0 {
			name = "poll-" + poll.String()
		}
		b.Run(name, func(b *testing.B) {
			log, _ := testLogger()
			p := openTest(b, core.KindFlowControl, nil, "", Options{Log: log})
			fc := p.FlowControl()
			fc.Setup(ibInfo)
			ev := []core.FlowEvent{{Kind: core.FlowBacklogged, Peer: 1}}
			out := make([]core.FlowDecision, 0, 16)
			lat := make([]time.Duration, 0, b.N)
			pid := p.Pid()
			cpu0, sw0, self0 := cpuTime(b, pid), switches(b, pid), selfCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ev[0].Value = int64(i)
				start := time.Now()
				out = fc.Observe(ev, out[:0])
				for len(out) == 0 {
					if poll > 0 {
						time.Sleep(poll)
					}
					out = fc.Observe(nil, out)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			// What a round trip costs the plugin process: on a node whose
			// cores the ranks keep busy, CPU and wake-ups taken from them.
			b.ReportMetric(float64((cpuTime(b, pid)-cpu0).Nanoseconds())/1e3/float64(b.N), "plugin-cpu-µs/op")
			b.ReportMetric(float64(switches(b, pid)-sw0)/float64(b.N), "plugin-switches/op")
			// The host's side: the proxy's goroutines and gRPC's, and the
			// caller's own Observe calls (spinning, or polling every 50µs).
			b.ReportMetric(float64((selfCPU()-self0).Nanoseconds())/1e3/float64(b.N), "host-cpu-µs/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}

// BenchmarkThroughput streams events through a plugin, 64 per Observe
// call, keeping up to 64×64 events unanswered, and reports answered events
// per second. The caller backs off (20µs) while the window is full: on a
// 2-core machine a spinning caller takes the core the plugin needs.
func BenchmarkThroughput(b *testing.B) {
	log, _ := testLogger()
	p := openTest(b, core.KindFlowControl, nil, "", Options{Log: log})
	fc := p.FlowControl()
	fc.Setup(ibInfo)
	const batch, window = 64, 64 * 64
	events := make([]core.FlowEvent, batch)
	out := make([]core.FlowDecision, 0, 1<<16)
	answered := 0
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		out = fc.Observe(events, out[:0])
		answered += len(out)
		for (i+1)*batch-answered >= window {
			time.Sleep(20 * time.Microsecond)
			out = fc.Observe(nil, out[:0])
			answered += len(out)
		}
	}
	for answered < b.N*batch {
		time.Sleep(20 * time.Microsecond)
		out = fc.Observe(nil, out[:0])
		answered += len(out)
	}
	b.ReportMetric(float64(answered)/time.Since(start).Seconds()/1e6, "Mevents/s")
}

// BenchmarkSettledPoint is what a rank pays for a monitoring point once
// extoll_dynamic has settled on two ranks (sender 0 holds the pool, sender
// 1 its static slots) — nearly every point of a message-rate run: built
// in, the policy runs Figure 12 and states the point quiet; as a plugin,
// the host drops the point its plugin stated quiet, with no round trip.
// A plugin costing the rank more here than the built-in would show in the
// plugin/built-in message-rate ratio; it costs less.
func BenchmarkSettledPoint(b *testing.B) {
	info := core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: 2, Senders: 2, BufferSize: 64, Buffers: 2 * 58}
	// settled runs sender 0's points through a fresh policy, answering its
	// proposals as the engine does, until it states them quiet.
	settled := func(b *testing.B) (*extolldynamic.Policy, core.FlowEvent, core.FlowDecision) {
		p := &extolldynamic.Policy{CreditSlots: 2}
		if _, err := p.Setup(info); err != nil {
			b.Fatal(err)
		}
		var answers []core.FlowEvent
		for range 100 {
			pt := core.FlowEvent{Kind: core.FlowMonitor, Peer: 0, Quota: int32(p.Intended(0))}
			ds := p.Observe(append(answers, pt), nil)
			answers = answers[:0]
			for _, d := range ds {
				switch d.Kind {
				case core.FlowSetQuota:
					answers = append(answers, core.FlowEvent{Kind: core.FlowQuota, Peer: d.Peer, Quota: int32(d.Value)})
				case core.FlowQuiet:
					if len(ds) == 1 {
						return p, pt, d
					}
				}
			}
		}
		b.Fatal("extoll_dynamic never settled on two ranks")
		return nil, core.FlowEvent{}, core.FlowDecision{}
	}
	out := make([]core.FlowDecision, 0, 16)
	b.Run("builtin", func(b *testing.B) {
		p, pt, _ := settled(b)
		pts := []core.FlowEvent{pt}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			out = p.Observe(pts, out[:0])
		}
		if len(out) != 1 || out[0].Kind != core.FlowQuiet {
			b.Fatalf("the settled policy answered %v, want its statement alone", out)
		}
	})
	b.Run("plugin", func(b *testing.B) {
		_, pt, quiet := settled(b)
		px, l, stats := newStillProxy(b)
		pts := []core.FlowEvent{pt}
		px.Observe(pts, nil)
		l.next(b)
		l.answers <- []core.FlowDecision{quiet}
		waitFor(b, "the statement", 20*time.Second, func() bool { return px.ackedSeq.Load() == 1 })
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			out = px.Observe(pts, out[:0])
		}
		b.StopTimer()
		if n := stats.stilled.Load(); n != int64(b.N) || stats.batches.Load() != 1 {
			b.Fatalf("%d of %d points kept from the plugin, %d batches sent: not the settled path", n, b.N, stats.batches.Load())
		}
	})
}

// selfCPU is the CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
