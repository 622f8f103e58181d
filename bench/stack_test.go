package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/btl/sm"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
	"github.com/rs/zerolog"
)

// jobSeq makes every twoRanks a job of its own: its segments' names
// must not meet those of the one before, or another test's.
var jobSeq atomic.Int64

// twoRanks opens two communicators over btl/sm in this process.
func twoRanks(b testing.TB) [2]*pml.Comm { return twoRanksWith(b, nil, pml.Options{}) }

// twoRanksWith is twoRanks with btl "sm" parameters and PML options.
func twoRanksWith(b testing.TB, params map[string]string, opts pml.Options) [2]*pml.Comm {
	boots := boot.Group(2, fmt.Sprintf("benchtest%d-%d", os.Getpid(), jobSeq.Add(1)))
	var comms [2]*pml.Comm
	mods := make([][]core.Module, 2)
	for r := range 2 {
		p := core.MustParams(sm.Params)
		for k, v := range params {
			if err := p.SetText(k, v); err != nil {
				b.Fatal(err)
			}
		}
		m, err := sm.Open(core.BTLEnv{Params: p, Boot: boots[r], Log: zerolog.Nop(), Metrics: core.NewMetrics()})
		if err != nil {
			b.Fatal(err)
		}
		mods[r] = m
	}
	var wg sync.WaitGroup
	for _, bt := range boots {
		wg.Go(func() { bt.Fence(context.Background()) })
	}
	wg.Wait()
	for r := range 2 {
		c, err := pml.New(r, 2, mods[r], opts)
		if err != nil {
			b.Fatal(err)
		}
		comms[r] = c
	}
	// Close is collective: each rank's finalize waits for the other's.
	b.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Go(func() { c.Close() })
		}
		wg.Wait()
	})
	return comms
}

// BenchmarkStackEager8B is the CPU cost of one 8-byte message through the
// whole stack — Irecv, Isend, delivery, matching, both Waits — with both
// ranks in one goroutine, so no cache line crosses cores: what the
// software adds to the wire time.
func BenchmarkStackEager8B(b *testing.B) {
	c := twoRanks(b)
	sbuf, rbuf := make([]byte, 8), make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		rr, _ := c[1].Irecv(rbuf, 0, 1)
		sr, _ := c[0].Isend(sbuf, 1, 1)
		c[0].Wait(sr)
		c[1].Wait(rr)
	}
}

// BenchmarkStackSendRecv8B is one round trip of blocking Send and Recv
// (what the latency benchmark calls), both ranks in one goroutine: each
// Recv is posted before its message is polled, as in a ping-pong whose
// receiver waits.
func BenchmarkStackSendRecv8B(b *testing.B) {
	c := twoRanks(b)
	buf := make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		c[0].Send(buf, 1, 1)
		c[1].Recv(buf, 0, 1)
		c[1].Send(buf, 0, 1)
		c[0].Recv(buf, 1, 1)
	}
}

// BenchmarkStackRate8B is the message-rate pattern per message: a window
// of 64 receives and 64 sends, then Waitall on both sides. Each side's
// calls are in a function of their own (rateRecvPost, rateSend,
// rateRecvWait), so that a profile's inclusive costs split the work
// between sender and receiver.
func BenchmarkStackRate8B(b *testing.B) {
	const window = 64
	c := twoRanks(b)
	sbuf, rbuf := make([]byte, 8), make([]byte, 8)
	rs, ss := make([]*pml.Request, window), make([]*pml.Request, window)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		rateRecvPost(c[1], rbuf, rs)
		rateSend(c[0], sbuf, ss)
		rateRecvWait(c[1], rs)
		n += window
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/msg")
}

// rateRecvPost posts the receiver's window.
//
//go:noinline
func rateRecvPost(c *pml.Comm, buf []byte, rs []*pml.Request) {
	for i := range rs {
		rs[i], _ = c.Irecv(buf, 0, 1)
	}
}

// rateSend sends the sender's window and waits for it.
//
//go:noinline
func rateSend(c *pml.Comm, buf []byte, ss []*pml.Request) {
	for i := range ss {
		ss[i], _ = c.Isend(buf, 1, 1)
	}
	c.Waitall(ss, nil)
}

// rateRecvWait waits for the receiver's window.
//
//go:noinline
func rateRecvWait(c *pml.Comm, rs []*pml.Request) { c.Waitall(rs, nil) }

// BenchmarkStackIdleTest is one round of a waiter's loop with nothing
// arriving (Test of a posted receive): what a rank spends between
// looking at the fast box twice, and so part of its reaction time.
func BenchmarkStackIdleTest(b *testing.B) {
	c := twoRanks(b)
	buf := make([]byte, 8)
	r, _ := c[1].Irecv(buf, 0, 1)
	b.ReportAllocs()
	for b.Loop() {
		c[1].Test(r)
	}
	c[1].Cancel(r)
	c[1].Wait(r)
}

// The eager paths over sm allocate nothing: a blocking Send (which takes
// no request), Recv, and a window of Isend/Irecv completed by Waitall.
func TestEagerPathsOverSMAllocateNothing(t *testing.T) {
	c := twoRanks(t)
	buf := make([]byte, 8)
	rs, ss := make([]*pml.Request, 8), make([]*pml.Request, 8)
	round := func() {
		c[0].Send(buf, 1, 1)
		c[1].Recv(buf, 0, 1)
		for i := range rs {
			rs[i], _ = c[1].Irecv(buf, 0, 2)
			ss[i], _ = c[0].Isend(buf, 1, 2)
		}
		c[0].Waitall(ss, nil)
		c[1].Waitall(rs, nil)
	}
	round()
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("%v allocations a round", a)
	}
}
