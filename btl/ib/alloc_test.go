//go:build !race

package ib

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestAnEagerSendAndItsDeliveryAllocateNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		o    jobOpts
	}{
		{"default layout", jobOpts{}},
		{"per-peer credits", jobOpts{params: map[string]string{"receive_queues": "P,128,8,6,4:P,65536,4,3,2"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := openJob(t, 2, c.o)
			n := 0
			j.mods[1].rx.handlers[testType] = nil
			j.mods[1].Register(testType, func(*core.Header, []byte) { n++ })
			ep := j.ep(0, 1)
			back := j.ep(1, 0)
			payload := make([]byte, 8)
			h := core.Header{Type: testType, Tag: 7}
			once := func() {
				want := n + 1
				for ep.Send(h, payload, nil, 0) != nil {
					j.progress()
				}
				for n < want {
					j.progress()
				}
				// Now and then a frame back, so credits ride home too.
				if n%16 == 0 {
					back.Send(core.Header{Type: core.TypeUserBase + 1, Src: 1}, payload, nil, 0)
				}
			}
			j.mods[0].Register(core.TypeUserBase+1, func(*core.Header, []byte) {})
			for range 2000 {
				once()
			}
			if a := testing.AllocsPerRun(3000, once); a != 0 {
				t.Fatalf("an 8-byte Send plus the Progress that delivers it allocates %.2f times", a)
			}
		})
	}
}
