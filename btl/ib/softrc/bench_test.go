package softrc

import (
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/btl/netif"
)

// BenchmarkPingPong measures the half round trip of an 8-byte send between
// two devices, each polled by its own goroutine (two processes' worth of
// work in one). It reports ns/op per one-way message.
func BenchmarkPingPong(b *testing.B) {
	x, y := newEnd(b, endOpts{}), newEnd(b, endOpts{})
	connect(b, x, y, defaultRC())
	run(b, x, y, 8)
}

// BenchmarkIdlePoll is what a waiting process pays per poll of a
// connected device with nothing arriving: ns/op is one CQ poll, and
// reads/op and epolls/op the system calls it made. Take it with
// perf stat -e task-clock: it is CPU time, whatever the load.
func BenchmarkIdlePoll(b *testing.B) {
	x, y := newEnd(b, endOpts{}), newEnd(b, endOpts{})
	connect(b, x, y, defaultRC())
	idlePoll(b, y)
}

// idlePoll measures idle CQ polls of y (BenchmarkIdlePoll).
func idlePoll(b *testing.B, y *end) {
	var wc [16]verbs.WC
	for range 100 {
		y.cq.Poll(wc[:]) // take the wire from the device goroutine
	}
	s0 := y.dev.Stats()
	b.ResetTimer()
	for range b.N {
		y.cq.Poll(wc[:])
	}
	b.StopTimer()
	s1 := y.dev.Stats()
	b.ReportMetric(float64(s1.EmptyReads-s0.EmptyReads+s1.Reads-s0.Reads)/float64(b.N), "reads/op")
	b.ReportMetric(float64(s1.Epolls-s0.Epolls)/float64(b.N), "epolls/op")
}

func BenchmarkPingPong4K(b *testing.B) {
	x, y := newEnd(b, endOpts{}), newEnd(b, endOpts{})
	connect(b, x, y, defaultRC())
	run(b, x, y, 4096)
}

func run(b *testing.B, x, y *end, size int) {
	xs, xr := x.reg(size, allAccess), x.reg(size, allAccess)
	ys, yr := y.reg(size, allAccess), y.reg(size, allAccess)
	for i := 0; i < 64; i++ {
		x.qp.PostRecv(&verbs.RecvWR{WRID: 1, SG: sge(xr, 0, size)})
		y.qp.PostRecv(&verbs.RecvWR{WRID: 1, SG: sge(yr, 0, size)})
	}
	n := b.N
	done := make(chan struct{})
	echo := func(e *end, s, r verbs.MR, first bool, n int) {
		var wc [16]verbs.WC
		wr := verbs.SendWR{Opcode: verbs.OpSend, SG: sge(s, 0, size)}
		rwr := verbs.RecvWR{WRID: 1, SG: sge(r, 0, size)}
		if first {
			e.qp.PostSend(&wr)
		}
		for got := 0; got < n; {
			k, _ := e.cq.Poll(wc[:])
			for i := 0; i < k; i++ {
				if wc[i].Opcode == verbs.WCRecv {
					got++
					e.qp.PostRecv(&rwr)
					if first && got == n {
						continue
					}
					e.qp.PostSend(&wr)
				}
			}
		}
	}
	go func() { echo(y, ys, yr, false, n); close(done) }()
	b.ResetTimer()
	echo(x, xs, xr, true, n)
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*n), "ns/oneway")
}

// BenchmarkPingPongEpoll is BenchmarkPingPong with polls that ask epoll
// instead of reading every link (see spinOnEpoll).
func BenchmarkPingPongEpoll(b *testing.B) {
	spinOnEpoll = true
	defer func() { spinOnEpoll = false }()
	x, y := newEnd(b, endOpts{}), newEnd(b, endOpts{})
	connect(b, x, y, defaultRC())
	run(b, x, y, 8)
}

// BenchmarkBandwidth measures one-directional RDMA-write bandwidth of
// size-byte writes, window of them in flight.
func BenchmarkBandwidth1MiB(b *testing.B) {
	const size, window = 1 << 20, 16
	x, y := newEnd(b, endOpts{}), newEnd(b, endOpts{})
	connect(b, x, y, defaultRC())
	src := x.reg(size, allAccess)
	dst := y.reg(size, allAccess)
	stop := pollInBackground(y)
	var wc [16]verbs.WC
	wr := verbs.SendWR{Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled, SG: sge(src, 0, size), RemoteAddr: dst.Addr(), RKey: dst.RKey()}
	inflight := 0
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; {
		for inflight < window && i < b.N {
			if err := x.qp.PostSend(&wr); err != nil {
				b.Fatal(err)
			}
			inflight++
			i++
		}
		n, _ := x.cq.Poll(wc[:])
		inflight -= n
	}
	for inflight > 0 {
		n, _ := x.cq.Poll(wc[:])
		inflight -= n
	}
	b.StopTimer()
	stop()
}

func BenchmarkPingPongIdleAfter(b *testing.B) {
	for _, d := range []time.Duration{50 * time.Microsecond, 200 * time.Microsecond, time.Millisecond} {
		b.Run(d.String(), func(b *testing.B) {
			x, y := newEnd(b, endOpts{cfg: DeviceConfig{IdleAfter: d}}), newEnd(b, endOpts{cfg: DeviceConfig{IdleAfter: d}})
			connect(b, x, y, defaultRC())
			run(b, x, y, 8)
			sx, sy := x.dev.Stats(), y.dev.Stats()
			b.ReportMetric(float64(sx.NICWakeups+sy.NICWakeups)/float64(b.N), "nicwakes/op")
			b.ReportMetric(float64(sx.NICEngagements+sy.NICEngagements)/float64(b.N), "engage/op")
		})
	}
}

// BenchmarkRead1MiB is the rendezvous of a 1 MiB message as the ib BTL's
// rdma_read protocol runs it: x reads y's buffer while y polls its CQ, as
// a sender waiting for the FIN does. It reports the writes the responder's
// socket took only in part, and how many polls x made per read.
func BenchmarkRead1MiB(b *testing.B) { benchRead1MiB(b) }

// BenchmarkRead1MiBHostCC is BenchmarkRead1MiB on sockets left with the
// host's congestion control (see netif.NoPacing): on a host whose default is BBR,
// the pacing that costs.
func BenchmarkRead1MiBHostCC(b *testing.B) {
	saved := netif.NoPacing
	netif.NoPacing = nil
	defer func() { netif.NoPacing = saved }()
	benchRead1MiB(b)
}

func benchRead1MiB(b *testing.B) {
	const size = 1 << 20
	x, y := newEnd(b, endOpts{}), newEnd(b, endOpts{})
	connect(b, x, y, defaultRC())
	src := y.reg(size, allAccess)
	dst := x.reg(size, allAccess)
	stop := pollInBackground(y)
	wr := verbs.SendWR{Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled, SG: sge(dst, 0, size), RemoteAddr: src.Addr(), RKey: src.RKey()}
	var wc [16]verbs.WC
	polls := 0
	blocked0 := y.dev.Stats().WritesBlocked
	x0, y0 := x.dev.Stats(), y.dev.Stats()
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		if err := x.qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		for done := false; !done; {
			k, err := x.cq.Poll(wc[:])
			if err != nil {
				b.Fatal(err)
			}
			polls++
			for i := range k {
				if wc[i].Status != verbs.WCSuccess {
					b.Fatalf("read: %v", wc[i].Status)
				}
				done = true
			}
		}
	}
	b.StopTimer()
	stop()
	b.ReportMetric(float64(y.dev.Stats().WritesBlocked-blocked0)/float64(b.N), "blocked/op")
	b.ReportMetric(float64(polls)/float64(b.N), "polls/op")
	// The device goroutines' wake-ups: each is a third thread on the
	// ranks' cores.
	x1, y1 := x.dev.Stats(), y.dev.Stats()
	b.ReportMetric(float64(x1.NICEngagements-x0.NICEngagements+y1.NICEngagements-y0.NICEngagements)/float64(b.N), "engage/op")
	b.ReportMetric(float64(x1.NICIdleChecks-x0.NICIdleChecks+y1.NICIdleChecks-y0.NICIdleChecks)/float64(b.N), "idlechecks/op")
}

// pollInBackground polls e's CQ on a goroutine of its own, as the other
// process of a benchmark would; the function returned stops it and waits.
func pollInBackground(e *end) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var wc [16]verbs.WC
		for {
			select {
			case <-done:
				return
			default:
				e.cq.Poll(wc[:])
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// BenchmarkOneWay8B is the CPU cost of one 8-byte send on the wire and
// its delivery, with both ends in one goroutine: x posts, y polls until
// the receive completes — one send and one receive system call, and
// every 16th message y's ACK, which x reads. No poll waits: the loopback
// write has queued the packet on y's socket before it returns. Take it
// with perf stat -e task-clock (CPU time, whatever the load).
func BenchmarkOneWay8B(b *testing.B) {
	x, y := newEnd(b, endOpts{}), newEnd(b, endOpts{})
	connect(b, x, y, defaultRC())
	src, dst := x.reg(8, allAccess), y.reg(8, allAccess)
	for range 64 {
		y.qp.PostRecv(&verbs.RecvWR{WRID: 1, SG: sge(dst, 0, 8)})
	}
	wr := verbs.SendWR{Opcode: verbs.OpSend, SG: sge(src, 0, 8)}
	rwr := verbs.RecvWR{WRID: 1, SG: sge(dst, 0, 8)}
	var wc [16]verbs.WC
	// Both devices' goroutines leave the wire to the polls.
	for range 100 {
		x.cq.Poll(wc[:])
		y.cq.Poll(wc[:])
	}
	s0 := y.dev.Stats()
	b.ResetTimer()
	for range b.N {
		if err := x.qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		for got := false; !got; {
			k, _ := y.cq.Poll(wc[:])
			for i := range k {
				got = got || wc[i].Opcode == verbs.WCRecv
			}
		}
		y.qp.PostRecv(&rwr)
		x.cq.Poll(wc[:])
	}
	b.StopTimer()
	s1 := y.dev.Stats()
	b.ReportMetric(float64(s1.Reads-s0.Reads)/float64(b.N), "reads/op")
	b.ReportMetric(float64(s1.EmptyReads-s0.EmptyReads)/float64(b.N), "empty/op")
}
