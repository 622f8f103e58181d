//go:build pmix && cgo

package pmix_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot/pmix"
	"github.com/gobtl/gobtl/core"
)

// TestUnderAnEngine runs only in ranks a PMIx engine started, e.g.
//
//	go test -c -tags pmix -o pmix.test ./boot/pmix
//	mpirun.openmpi -np 4 ./pmix.test -test.run UnderAnEngine
//	srun --mpi=pmix -n 4 ./pmix.test -test.run UnderAnEngine
func TestUnderAnEngine(t *testing.T) {
	if !pmix.Present(os.Getenv) {
		t.Skip("not started by a PMIx engine (mpirun, srun --mpi=pmix)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pmix.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	val := func(r int) []byte { return bytes.Repeat([]byte(fmt.Sprint(r, ";")), 5000) }
	if err := c.Put("v", val(c.Rank())); err != nil {
		t.Fatal(err)
	}
	if err := c.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	for r := range c.Size() {
		v, err := c.Get(ctx, r, "v")
		if err != nil || !bytes.Equal(v, val(r)) {
			t.Fatalf("rank %d's value: %d bytes, %v", r, len(v), err)
		}
	}
	if _, err := c.Get(ctx, (c.Rank()+1)%c.Size(), "missing"); err == nil {
		t.Error("a key nobody put was found")
	}
	local := core.LocalRanks(c, c.Size(), c.Rank())
	t.Logf("rank %d of %d in %s: %d nodes, this node's ranks %v", c.Rank(), c.Size(), c.JobID(), c.Nodes(), local)
	if c.Node(c.Rank()) < 0 || c.Nodes() < 1 || len(local) < 1 {
		t.Errorf("rank %d is on node %d of %d", c.Rank(), c.Node(c.Rank()), c.Nodes())
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
}
