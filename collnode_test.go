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
				got := c.Coll().PML().Metrics().Counter("coll.allreduce.shm").Load() > 0
				if got != tc.want {
					return fmt.Errorf("through the node component: %v, want %v", got, tc.want)
				}
				return nil
			})
		})
	}
}
