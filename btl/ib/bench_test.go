package ib

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

// benchLayouts are the receive layouts the per-frame benchmarks run:
// the component's default (shared queues) and per-peer queues under
// static credits, whose frames spend and carry credits.
var benchLayouts = []struct {
	name string
	o    jobOpts
}{
	{"srq", jobOpts{params: map[string]string{"idle_after": "1s"}}},
	{"credits", jobOpts{params: map[string]string{"idle_after": "1s", "receive_queues": "P,128,8,6,4:P,65536,4,3,2"}}},
}

// BenchmarkEager8B is the CPU cost of one 8-byte frame between two ib
// modules over softrc, both ranks in one goroutine: the Send, the
// Progress that delivers it and the Progress that takes its send
// completion back, and every 16th frame one the other way so that
// credits ride home. Time stands still for the modules, so that their
// housekeeping, which runs by the clock, does not count. The wire's system calls are the same whatever the
// module's shape: run it under callgrind for the modules' instructions
// per frame. Its devices' goroutines never take the wire over
// (idle_after = 1s; a link's handshake waits for it once), so the polls find what they find in the same order
// from run to run.
func BenchmarkEager8B(b *testing.B) {
	for _, c := range benchLayouts {
		b.Run(c.name, func(b *testing.B) {
			o := c.o
			o.clock = new(core.ManualClock) // housekeeping runs once, at the first Progress
			j := openJob(b, 2, o)
			n := 0
			j.mods[1].Register(testType+1, func(*core.Header, []byte) { n++ })
			j.mods[0].Register(testType+1, func(*core.Header, []byte) {})
			ep, back := j.ep(0, 1), j.ep(1, 0)
			payload := make([]byte, 8)
			h := core.Header{Type: testType + 1, Tag: 7}
			hb := core.Header{Type: testType + 1, Src: 1}
			once := func() {
				want := n + 1
				for ep.Send(h, payload, nil, 0) != nil {
					j.progress()
				}
				for n < want {
					j.progress()
				}
				if n%16 == 0 {
					for back.Send(hb, payload, nil, 0) != nil {
						j.progress()
					}
				}
			}
			for range 1000 {
				once()
			}
			b.ReportAllocs()
			for b.Loop() {
				once()
			}
		})
	}
}
