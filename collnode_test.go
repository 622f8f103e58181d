package gobtl

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The decision takes the node component (coll/shm) by itself where the
// node's ranks each own a CPU, and keeps the point-to-point algorithms
// where they share them; a stack that forces "shm" gets it either way.
func TestTheNodeComponentServesRanksThatOwnACPU(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, tc := range []struct {
		n     int
		stack string
		want  bool
	}{
		{min(2, cpus), "", cpus >= 2},
		{cpus + 1, "", false},
		{cpus + 1, "coll {\n  allreduce = \"shm\"\n}\n", true},
	} {
		t.Run(fmt.Sprintf("%d ranks on %d CPUs %q", tc.n, cpus, tc.stack), func(t *testing.T) {
			var opts Options
			if tc.stack != "" {
				stack := filepath.Join(t.TempDir(), "stack.hcl")
				if err := os.WriteFile(stack, []byte("btl \"inproc\" \"a\" {}\n"+tc.stack), 0o644); err != nil {
					t.Fatal(err)
				}
				opts.ConfigFiles = []string{stack}
			}
			run(t, tc.n, opts, func(c *Comm) error {
				v := []int64{int64(c.Rank())}
				if err := Allreduce(c, v, v, Sum); err != nil {
					return err
				}
				if want := int64(tc.n * (tc.n - 1) / 2); v[0] != want {
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
