package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/btl/sm"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
	"github.com/rs/zerolog"
)

// twoRanks opens two communicators over btl/sm in this process.
func twoRanks(b *testing.B) [2]*pml.Comm {
	boots := boot.Group(2, fmt.Sprintf("benchtest%d", os.Getpid()))
	var comms [2]*pml.Comm
	mods := make([][]core.Module, 2)
	for r := range 2 {
		m, err := sm.Open(core.BTLEnv{Params: core.MustParams(sm.Params), Boot: boots[r], Log: zerolog.Nop(), Metrics: core.NewMetrics()})
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
		c, err := pml.New(r, 2, mods[r], pml.Options{})
		if err != nil {
			b.Fatal(err)
		}
		comms[r] = c
		b.Cleanup(func() { c.Close() })
	}
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
