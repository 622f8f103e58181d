package pml

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	mrand "math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/core"
)

// hangAfter is how long the ranks of a test may take before the harness
// calls it a hang and dumps the engines' state.
var hangAfter = 60 * time.Second

// errRankFailed is the cause world.run aborts the other ranks with when
// one fails.
var errRankFailed = errors.New("another rank failed")

// world is n ranks in this process over an inproc fabric with the given
// rails (each rank also gets a self module).
type world struct {
	f     *inproc.Fabric
	comms []*Comm
	// noFinalize skips the collective Close at the end of run, for tests
	// that break the job on purpose.
	noFinalize bool
}

// tester is what the harness needs of *testing.T, *testing.B and *rapid.T.
type tester interface {
	Helper()
	Fatal(args ...any)
	Logf(format string, args ...any)
	Error(args ...any)
}

// newWorld builds the ranks; each per function may adjust a rank's options
// (a policy instance per rank, as every process has its own).
func newWorld(t tester, n int, rails []inproc.RailOptions, opts Options, per ...func(rank int, o *Options)) *world {
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
		for _, f := range per {
			f(r, &o)
		}
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

// close closes every rank concurrently: Close is collective.
func (w *world) close() {
	var wg sync.WaitGroup
	for _, c := range w.comms {
		wg.Add(1)
		go func(c *Comm) { defer wg.Done(); c.Close() }(c)
	}
	wg.Wait()
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
			err := fn(c)
			if err == nil && !w.noFinalize {
				err = c.Close() // finalize: collective
			}
			if err != nil && errors.Is(err, errRankFailed) {
				return // a casualty of the first failure, reported there
			}
			if err != nil {
				t.Logf("rank %d failed: %v", c.Rank(), err)
				errs <- fmt.Errorf("rank %d: %w", c.Rank(), err)
				// As a launcher does: the others stop waiting for this
				// rank, so that the test reports now, not at hangAfter.
				for _, o := range w.comms {
					o.Abort(fmt.Errorf("%w: rank %d", errRankFailed, c.Rank()))
				}
			}
		}(c)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangAfter):
		var state string
		for _, c := range w.comms {
			state += c.dump()
		}
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatal("ranks did not finish within " + hangAfter.String() + ": a hang\n" + state + string(buf))
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

// sendPattern is a rank function for world.run: rank 0 sends size bytes
// of pattern seed to rank 1, which checks them.
func sendPattern(size, seed int) func(c *Comm) error {
	return func(c *Comm) error {
		buf := make([]byte, size)
		if c.Rank() == 0 {
			return c.Send(pattern(buf, seed), 1, 0)
		}
		_, err := c.Recv(buf, 0, 0)
		if err == nil && !bytes.Equal(buf, pattern(make([]byte, size), seed)) {
			err = errors.New("wrong data")
		}
		return err
	}
}

// exchange has the two ranks of a world send each other a message of
// every size in sizes, all at once, each receive posted before the send,
// and checks that every message arrives intact and in order.
func exchange(c *Comm, sizes []int) error {
	peer := 1 - c.Rank()
	var reqs []*Request
	var bufs [][]byte
	for i, n := range sizes {
		b := make([]byte, n)
		r, err := c.Irecv(b, peer, 1)
		if err != nil {
			return err
		}
		reqs, bufs = append(reqs, r), append(bufs, b)
		s, err := c.Isend(pattern(make([]byte, n), i*10+c.Rank()), peer, 1)
		if err != nil {
			return err
		}
		reqs = append(reqs, s)
	}
	if err := c.Waitall(reqs, nil); err != nil {
		return err
	}
	for i, n := range sizes {
		if !bytes.Equal(bufs[i], pattern(make([]byte, n), i*10+peer)) {
			return fmt.Errorf("message %d (%d bytes) corrupted or out of order", i, n)
		}
	}
	return nil
}

func checksum(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

func newRand(seed int64) *mrand.Rand { return mrand.New(mrand.NewPCG(uint64(seed), 7)) }

// dump describes an engine's pending work, for hang reports.
func (c *Comm) dump() string {
	var b strings.Builder
	c.State(0).Report(&b, fmt.Sprintf("rank %d: ", c.Rank()))
	return b.String()
}
