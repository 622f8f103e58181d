package pml

import (
	"testing"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/core"
)

func TestLeadChunkShortensOnlyTheFirstFragmentOfLongMessages(t *testing.T) {
	for _, tc := range []struct{ maxSend, total, want int }{
		{64 << 10, 1 << 20, pipelineLead},                              // long: a short first fragment
		{64 << 10, 4 << 20, pipelineLead},                              //
		{64 << 10, 256 << 10, 256 << 10},                               // medium: its power-of-two chunks are short already
		{8 << 10, 1 << 20, 1 << 20},                                    // fragments no longer than the lead
		{100, 1 << 20, 1 << 20},                                        // tiny fragments
		{32 << 10, 8 * (32<<10 - fragFixed), 8 * (32<<10 - fragFixed)}, // at the bound: medium
	} {
		if got := leadChunk(tc.maxSend, tc.total); got != tc.want {
			t.Errorf("leadChunk(%d, %d) = %d, want %d", tc.maxSend, tc.total, got, tc.want)
		}
	}
}

// A long pipelined message starts with a pipelineLead fragment, then
// fills whole ones, and arrives intact; the frames per message are those
// of whole fragments alone (the last one is partial either way).
func TestALongPipelineStartsWithAShortFragment(t *testing.T) {
	const size, maxSend = 1 << 20, 64 << 10
	f := inproc.New(2, nil)
	f.Rail("r", inproc.RailOptions{NoRDMA: true, MaxSendSize: maxSend, RndvEagerLimit: -1}) // nothing inline: the pump sends byte 0
	w := &world{f: f}
	watch := &fragCount{Module: f.Modules(0)[0], sizes: map[uint64]int{}}
	for r := range 2 {
		mods := f.Modules(r)
		if r == 0 {
			mods = []core.Module{watch}
		}
		c, err := New(r, 2, mods, Options{Metrics: core.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		w.comms = append(w.comms, c)
	}
	t.Cleanup(w.close)
	w.run(t, sendPattern(size, 3))
	whole := fragChunk(maxSend, size)
	if got := watch.sizes[0]; got != pipelineLead {
		t.Fatalf("first fragment %d bytes, want %d", got, pipelineLead)
	}
	if got := watch.sizes[pipelineLead]; got != whole {
		t.Fatalf("second fragment %d bytes, want a whole %d", got, whole)
	}
	if n, want := len(watch.sizes), (size+whole-1)/whole; n != want {
		t.Fatalf("%d fragments, want %d as with whole ones only", n, want)
	}
}
