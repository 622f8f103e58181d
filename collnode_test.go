package gobtl

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Ranks that are goroutines of one process share its CPUs (the zero
// coll.Machine): the decision keeps the point-to-point algorithms, and a
// stack that forces "shm" gets the node component all the same. (Ranks
// that are processes and own their cores take it by themselves: coll/shm's
// multi-process tests.)
func TestTheNodeComponentServesInProcessRanksWhenForced(t *testing.T) {
	for _, tc := range []struct {
		stack string
		want  bool
	}{
		{"", false},
		{"coll {\n  allreduce = \"shm\"\n}\n", true},
	} {
		t.Run(fmt.Sprintf("%q", tc.stack), func(t *testing.T) {
			const n = 3
			stack := filepath.Join(t.TempDir(), "stack.hcl")
			if err := os.WriteFile(stack, []byte("btl \"inproc\" \"a\" {}\n"+tc.stack), 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, n, Options{ConfigFiles: []string{stack}}, func(c *Comm) error {
				v := []int64{int64(c.Rank())}
				if err := Allreduce(c, v, v, Sum); err != nil {
					return err
				}
				if want := int64(n * (n - 1) / 2); v[0] != want {
					return fmt.Errorf("allreduce gave %d, want %d", v[0], want)
				}
				got := c.coll.PML().Metrics().Counter("coll.allreduce.shm").Load() > 0
				if got != tc.want {
					return fmt.Errorf("through the node component: %v, want %v", got, tc.want)
				}
				return nil
			})
		})
	}
}

// The typed reductions of every operation and element type through the
// node component: a stack that forces allreduce and reduce to "shm".
func TestTypedReductionsThroughTheNodeComponent(t *testing.T) {
	stack := filepath.Join(t.TempDir(), "stack.hcl")
	if err := os.WriteFile(stack, []byte("btl \"inproc\" \"a\" {}\ncoll {\n  allreduce = \"shm\"\n  reduce = \"shm\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	every := []func(*Comm) error{
		reductions[int], reductions[int8], reductions[int16], reductions[int32], reductions[int64],
		reductions[uint], reductions[uint8], reductions[uint16], reductions[uint32], reductions[uint64],
		reductions[uintptr], reductions[float32], reductions[float64], reductions[myInt],
	}
	run(t, 4, Options{ConfigFiles: []string{stack}}, func(c *Comm) error {
		for _, f := range every {
			if err := f(c); err != nil {
				return err
			}
		}
		if c.coll.PML().Metrics().Counter("coll.reduce.shm").Load() == 0 {
			return fmt.Errorf("no reduce went through the node component")
		}
		return nil
	})
}
