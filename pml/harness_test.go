package pml

import (
	"fmt"
	"hash/crc32"
	mrand "math/rand/v2"
	"sync"
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

// tester is what the harness needs of *testing.T, *testing.B and *rapid.T.
type tester interface {
	Helper()
	Fatal(args ...any)
	Logf(format string, args ...any)
	Error(args ...any)
}

func newWorld(t tester, n int, rails []inproc.RailOptions, opts Options) *world {
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
	if c, ok := t.(interface{ Cleanup(func()) }); ok {
		c.Cleanup(w.close)
	}
	return w
}

func (w *world) close() {
	for _, c := range w.comms {
		c.Close()
	}
}

// run runs fn for every rank in its own goroutine and fails the test on
// the first error or when the ranks take longer than a generous deadline
// (a hang is a failure, reported rather than waited on forever).
func (w *world) run(t tester, fn func(c *Comm) error) {
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

func newRand(seed int64) *mrand.Rand { return mrand.New(mrand.NewPCG(uint64(seed), 7)) }
