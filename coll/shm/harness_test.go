package shm_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/coll/shm"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// tester is what the harness needs of *testing.T and *rapid.T.
type tester interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

var bg = context.Background()

// prefixSeq makes every job's segment names its own, so that a test can
// look for what it left in /dev/shm.
var prefixSeq atomic.Int64

// job is n ranks in this process over an inproc fabric, each with its
// collective layer, rank r on node nodes[r] (nil: all on one).
type job struct {
	f      *inproc.Fabric
	comms  []*coll.Comm
	prefix string
}

// newJob builds the ranks; tune gives each rank's tuning, its Node
// already set (use forceAll).
func newJob(t tester, n int, tune func(r int) *coll.Tuning, opts ...func(*pml.Options)) *job {
	t.Helper()
	f := inproc.New(n, nil)
	f.Rail("rail0", inproc.RailOptions{EagerLimit: 1024, MaxSendSize: 4096})
	j := &job{f: f, prefix: lastPrefix}
	for r := range n {
		mods := append([]core.Module{self.New(r, 1024, 4096)}, f.Modules(r)...)
		o := pml.Options{Metrics: core.NewMetrics()}
		for _, f := range opts {
			f(&o)
		}
		p, err := pml.New(r, n, mods, o)
		if err != nil {
			t.Fatal(err)
		}
		j.comms = append(j.comms, coll.New(p, tune(r)))
	}
	return j
}

// testOptions are the component's options in the tests: small slots and
// chunks, so that a few KiB cross both and wrap the pipeline, a short
// spin (the ranks share two CPUs), and names of the test's own.
func testOptions(label string) shm.Options {
	return shm.Options{Label: label, Small: 256, Chunk: 512, Depth: 3, Spin: 64, Flat: flat,
		Prefix: fmt.Sprintf("gobtl-shmtest%d-%d-", os.Getpid(), prefixSeq.Add(1))}
}

// flat is the tests' Options.Flat: -1 (the tree) unless a test sets it.
var flat = -1

// forceAll is a tuning that sends every collective the component serves
// to it, rank r on node nodes[r] (nil: one node), with opts' changes to
// the test options (nil: none).
func forceAll(nodes []int, opts func(shm.Options) shm.Options) func(r int) *coll.Tuning {
	prefix := fmt.Sprintf("gobtl-shmtest%d-%d-", os.Getpid(), prefixSeq.Add(1))
	lastPrefix = prefix
	return func(r int) *coll.Tuning {
		label := "one"
		if nodes != nil {
			label = fmt.Sprint("node", nodes[r])
		}
		o := testOptions(label)
		o.Prefix = prefix
		if opts != nil {
			o = opts(o)
		}
		tu := &coll.Tuning{Node: shm.New(o)}
		for _, k := range []string{"barrier", "bcast", "reduce", "allreduce", "allgather"} {
			if err := tu.Set(k, "shm"); err != nil {
				panic(err)
			}
		}
		return tu
	}
}

// lastPrefix is the segment prefix of the tuning forceAll made last: the
// tests are not parallel.
var lastPrefix string

// close finalizes every rank at once (Close is collective).
func (j *job) close() {
	var wg sync.WaitGroup
	for _, c := range j.comms {
		wg.Go(func() { c.PML().(*pml.Comm).Close() })
	}
	wg.Wait()
}

const hangAfter = 60 * time.Second

// run runs fn on every rank, each in its goroutine, and fails the test on
// any rank's error or on a hang.
func (j *job) run(t tester, fn func(c *coll.Comm) error) {
	t.Helper()
	errs := make([]error, len(j.comms))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r, c := range j.comms {
		wg.Go(func() {
			err := fn(c)
			mu.Lock()
			errs[r] = err
			mu.Unlock()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangAfter):
		buf := make([]byte, 1<<20)
		mu.Lock()
		t.Fatalf("ranks still running after %v: a hang (errors so far: %v)\n%s", hangAfter, errs, buf[:runtime.Stack(buf, true)])
	}
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// calls is how many collectives of kind (as the coll block names it) c
// ran with alg.
func calls(c *coll.Comm, kind, alg string) int64 {
	return c.PML().Metrics().Counter("coll." + kind + "." + alg).Load()
}

// leftIn lists the files in /dev/shm whose names start with prefix.
func leftIn(prefix string) []string {
	m, _ := filepath.Glob(filepath.Join("/dev/shm", prefix+"*"))
	return m
}

// value is rank r's i-th test element.
func value(r, i int) int64 { return int64(r*1000003+i*7919) ^ int64(i)<<40 }

// fill writes int64 values of rank r (seed s) into b.
func fill(b []byte, r, s int) []byte {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], uint64(value(r, i/8+s)))
	}
	return b
}

var sumInt64 = coll.Op{Size: 8, Commutative: true, Fn: coll.Func(func(inout, in []byte) {
	for i := 0; i+8 <= len(inout); i += 8 {
		binary.LittleEndian.PutUint64(inout[i:], binary.LittleEndian.Uint64(inout[i:])+binary.LittleEndian.Uint64(in[i:]))
	}
})}

// compose composes affine maps x → a·x+b (16-byte elements): associative,
// not commutative, so a result in the wrong rank order shows.
var compose = coll.Op{Size: 16, Fn: coll.Func(func(inout, in []byte) {
	for i := 0; i+16 <= len(inout); i += 16 {
		a1, b1 := binary.LittleEndian.Uint64(inout[i:]), binary.LittleEndian.Uint64(inout[i+8:])
		a2, b2 := binary.LittleEndian.Uint64(in[i:]), binary.LittleEndian.Uint64(in[i+8:])
		binary.LittleEndian.PutUint64(inout[i:], a2*a1)
		binary.LittleEndian.PutUint64(inout[i+8:], a2*b1+b2)
	}
})}

// fold combines the ranks' vectors in rank order: the serial reference.
func fold(op coll.Op, size, n, seed int) []byte {
	acc := fill(make([]byte, size), 0, seed)
	for r := 1; r < n; r++ {
		op.Fn.Combine(acc, fill(make([]byte, size), r, seed))
	}
	return acc
}

func diff(what string, got, want []byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: byte %d of %d is %#x, want %#x", what, i, len(got), got[i], want[i])
		}
	}
	return nil
}
