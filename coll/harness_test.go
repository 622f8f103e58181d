package coll_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/coll/shm"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// job is n ranks in this process over an inproc fabric, each with its
// collective layer.
type job struct {
	f     *inproc.Fabric
	comms []*coll.Comm
}

// tester is what the harness needs of *testing.T and *rapid.T.
type tester interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// newJob builds the ranks of a job over one inproc rail whose eager limit
// is small, so that collectives of a few KiB already go by rendezvous.
func newJob(t tester, n int, tu *coll.Tuning, opts ...func(*pml.Options)) *job {
	t.Helper()
	f := inproc.New(n, nil)
	f.Rail("rail0", inproc.RailOptions{EagerLimit: 1024, MaxSendSize: 4096})
	j := &job{f: f}
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
		j.comms = append(j.comms, coll.New(p, tu))
	}
	return j
}

// close finalizes every rank at once (Close is collective).
func (j *job) close() {
	var wg sync.WaitGroup
	for _, c := range j.comms {
		wg.Go(func() { pmlOf(c).Close() })
	}
	wg.Wait()
}

// hangAfter is how long the ranks of one run may take before the test
// calls it a hang.
const hangAfter = 60 * time.Second

// run runs fn on every rank, each in its goroutine, and fails the test on
// any rank's error or on a hang.
func (j *job) run(t tester, fn func(c *coll.Comm) error) {
	t.Helper()
	errs := make([]error, len(j.comms))
	var wg sync.WaitGroup
	for r, c := range j.comms {
		wg.Go(func() { errs[r] = fn(c) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangAfter):
		buf := make([]byte, 1<<20)
		t.Fatalf("ranks still running after %v: a hang\n%s", hangAfter, buf[:runtime.Stack(buf, true)])
	}
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// withJob runs fn on a fresh job of n ranks and closes it.
func withJob(t tester, n int, tu *coll.Tuning, fn func(c *coll.Comm) error) {
	t.Helper()
	j := newJob(t, n, tu)
	defer j.close()
	j.run(t, fn)
}

var bg = context.Background()

// value is rank r's i-th test element.
func value(r, i int) int64 { return int64(r*1000003+i*7919) ^ int64(i)<<40 }

// fill writes count int64 values of rank r (seed s) into b.
func fill(b []byte, r, s int) []byte {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], uint64(value(r, i/8+s)))
	}
	return b
}

// sumInt64 is the sum of little-endian int64s.
var sumInt64 = coll.Op{Size: 8, Commutative: true, Fn: coll.Func(func(inout, in []byte) {
	for i := 0; i+8 <= len(inout); i += 8 {
		binary.LittleEndian.PutUint64(inout[i:], binary.LittleEndian.Uint64(inout[i:])+binary.LittleEndian.Uint64(in[i:]))
	}
})}

// compose composes affine maps x → a·x+b (16-byte elements): inout = the
// map that applies inout first, then in. It is associative and does not
// commute, so a result in the wrong rank order shows.
var compose = coll.Op{Size: 16, Fn: coll.Func(func(inout, in []byte) {
	for i := 0; i+16 <= len(inout); i += 16 {
		a1, b1 := binary.LittleEndian.Uint64(inout[i:]), binary.LittleEndian.Uint64(inout[i+8:])
		a2, b2 := binary.LittleEndian.Uint64(in[i:]), binary.LittleEndian.Uint64(in[i+8:])
		binary.LittleEndian.PutUint64(inout[i:], a2*a1)
		binary.LittleEndian.PutUint64(inout[i+8:], a2*b1+b2)
	}
})}

// fold combines ranks lo..hi-1's vectors of rank-seeded values with op,
// in rank order: the serial reference.
func fold(op coll.Op, size, lo, hi, seed int) []byte {
	acc := fill(make([]byte, size), lo, seed)
	for r := lo + 1; r < hi; r++ {
		op.Fn.Combine(acc, fill(make([]byte, size), r, seed))
	}
	return acc
}

// forced is a tuning that forces alg for k; "shm" gets the shared-memory
// node component with small chunks (coll/shm), so that the vectors of
// the tests cross its slots and its chunks alike.
func forced(k, alg string, seg int) *coll.Tuning {
	tu := &coll.Tuning{Segment: seg, Node: shmNode}
	if err := tu.Set(k, alg); err != nil {
		panic(err)
	}
	return tu
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

// pmlOf is the PML communicator under c: the tests build every one from a
// *pml.Comm.
func pmlOf(c *coll.Comm) *pml.Comm { return c.PML().(*pml.Comm) }

// shmNode is the node component the tests force: slots of 512 bytes and
// chunks of 1 KiB, so that a few KiB already take several chunk steps
// and wrap the pipeline.
var shmNode = shm.New(shm.Options{Small: 512, Chunk: 1024, Depth: 3})
