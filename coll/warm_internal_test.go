package coll

import (
	"testing"

	"github.com/gobtl/gobtl/btl/inproc"
	"github.com/gobtl/gobtl/btl/self"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// A small allreduce or a barrier called again between the same buffers
// runs the steps built for the last call (Comm.again); other buffers
// build new ones. The results are those of the new call's values and
// operation either way.
func TestASmallCollectiveReusesItsStepsOnlyBetweenTheSameBuffers(t *testing.T) {
	f := inproc.New(2, nil)
	f.Rail("rail0", inproc.RailOptions{})
	var cs [2]*Comm
	for r := range 2 {
		p, err := pml.New(r, 2, append([]core.Module{self.New(r, 1024, 4096)}, f.Modules(r)...), pml.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cs[r] = New(p, nil)
	}
	defer func() {
		done := make(chan struct{})
		go func() { pmlOf(cs[1]).Close(); close(done) }()
		pmlOf(cs[0]).Close()
		<-done
	}()
	// both runs an allreduce of a and b (rank 0's and rank 1's vectors,
	// results in ra and rb) on both ranks from this goroutine.
	both := func(a, b, ra, rb []int64, op Op) {
		t.Helper()
		q0, err := cs[0].Iallreduce(Bytes(a), Bytes(ra), op)
		if err != nil {
			t.Fatal(err)
		}
		q1, err := cs[1].Iallreduce(Bytes(b), Bytes(rb), op)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range []*pml.Request{q0, q1} {
			if _, err := pmlOf(cs[i]).Wait(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b, ra, rb := []int64{1}, []int64{2}, make([]int64, 1), make([]int64, 1)
	both(a, b, ra, rb, Sum[int64]())
	first := cs[0].warm[KindAllreduce]
	if ra[0] != 3 || rb[0] != 3 || first == nil {
		t.Fatalf("sum %d, %d; kept schedule %v", ra[0], rb[0], first)
	}
	a[0], b[0] = 5, 7
	both(a, b, ra, rb, Max[int64]())
	if ra[0] != 7 || rb[0] != 7 {
		t.Fatalf("max again between the same buffers: %d, %d, want 7", ra[0], rb[0])
	}
	if cs[0].warm[KindAllreduce] != first {
		t.Fatal("a call between the same buffers built its steps anew")
	}
	// In place: other buffers, other steps.
	both(a, b, a, b, Sum[int64]())
	if a[0] != 12 || b[0] != 12 {
		t.Fatalf("in place: %d, %d, want 12", a[0], b[0])
	}
	if cs[0].warm[KindAllreduce] == first {
		t.Fatal("a call between other buffers ran the steps of the last one")
	}
	// Barriers keep theirs whatever the buffers of other calls.
	for range 2 {
		q0, _ := cs[0].Ibarrier()
		q1, _ := cs[1].Ibarrier()
		pmlOf(cs[0]).Wait(q0)
		pmlOf(cs[1]).Wait(q1)
	}
	bar := cs[0].warm[KindBarrier]
	q0, _ := cs[0].Ibarrier()
	q1, _ := cs[1].Ibarrier()
	pmlOf(cs[0]).Wait(q0)
	pmlOf(cs[1]).Wait(q1)
	if bar == nil || cs[0].warm[KindBarrier] != bar {
		t.Fatal("a barrier built its steps anew")
	}
}

// pmlOf is the PML communicator under c, a *pml.Comm here.
func pmlOf(c *Comm) *pml.Comm { return c.PML().(*pml.Comm) }
