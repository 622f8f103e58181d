package pml

import (
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/core"
)

// world is n ranks in this process over an inproc fabric with the given
// rails (each rank also gets a self module).
type world struct {
	f     *inproc.Fabric
	comms []*Comm
}

func newWorld(t testing.TB, n int, rails []inproc.RailOptions, opts Options) *world {
	t.Helper()
	f := inproc.New(n, nil)
	for i, ro := range rails {
		f.Rail(fmt.Sprintf("rail%d", i), ro)
	}
	w := &world{f: f}
	for r := 0; r < n; r++ {
		mods := append([]core.Module{self.New(r, 64<<10, 256<<10)}, f.Modules(r)...)
		o := opts
		o.Metrics = core.NewMetrics()
		c, err := New(r, n, mods, o)
		if err != nil {
			t.Fatal(err)
		}
		w.comms = append(w.comms, c)
	}
	t.Cleanup(func() {
		for _, c := range w.comms {
			c.Close()
		}
	})
	return w
}

// run runs fn for every rank in its own goroutine and fails the test on
// the first error or when the ranks take longer than a generous deadline
// (a hang is a failure, reported rather than waited on forever).
func (w *world) run(t testing.TB, fn func(c *Comm) error) {
	t.Helper()
	errs := make(chan error, len(w.comms))
	var wg sync.WaitGroup
	for _, c := range w.comms {
		wg.Add(1)
		go func(c *Comm) {
			defer wg.Done()
			if err := fn(c); err != nil {
				t.Logf("rank %d failed: %v", c.Rank(), err)
				errs <- fmt.Errorf("rank %d: %w", c.Rank(), err)
			}
		}(c)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("ranks did not finish within 60s: a hang")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// pattern fills b with bytes derived from seed.
func pattern(b []byte, seed int) []byte {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func checksum(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
