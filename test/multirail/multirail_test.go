// Package multirail holds the integration tests of multirail stacks (seed
// 001): the example stacks run through gobtl.Init over ib/softrc rails,
// and a local peer's exclusivity (shared memory, not the rails, unless
// the job says otherwise).
package multirail

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/layers"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// exchange sends every size both ways at once and checks the bytes.
func exchange(c *gobtl.Comm, sizes []int) error {
	peer := 1 - c.Rank()
	for i, n := range sizes {
		out, in := msgtest.Fill(make([]byte, n), uint64(2*i+c.Rank())), make([]byte, n)
		r, err := c.Irecv(in, peer, i)
		if err != nil {
			return err
		}
		if err := c.Send(out, peer, i); err != nil {
			return err
		}
		if _, err := c.Wait(r); err != nil {
			return err
		}
		if err := msgtest.Check(in, uint64(2*i+peer)); err != nil {
			return fmt.Errorf("%d-byte message %d arrived corrupt: %w", n, i, err)
		}
	}
	return nil
}

// counters reads the named counters of this rank.
func counters(c *gobtl.Comm, names ...string) map[string]int64 {
	snap := c.Metrics().Snapshot()
	out := map[string]int64{}
	for _, n := range names {
		v, _ := snap[n].(int64)
		out[n] = v
	}
	return out
}

var sizes = []int{0, 8, 4 << 10, 64 << 10, 1 << 20, 3<<20 + 5}

// TestTheMultirailExamplesStripeOverBothRails runs conf/examples'
// multirail stacks through Init: the peer's virtual channel has one
// subchannel per rail and RDMA data travels both.
func TestTheMultirailExamplesStripeOverBothRails(t *testing.T) {
	for _, tc := range []struct {
		file  string
		rails []string
	}{
		{"ib-multirail.hcl", []string{"hca0", "hca1"}},
		{"ib-4x1x.hcl", []string{"x4", "x1"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			file := filepath.Join("..", "..", "conf", "examples", tc.file)
			err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{file}}, func(c *gobtl.Comm) error {
				if w := layers.PML(c).Weights(1 - c.Rank()); len(w) != len(tc.rails) {
					return fmt.Errorf("the virtual channel has %d subchannels (weights %v), want one per rail", len(w), w)
				}
				if err := exchange(c, sizes); err != nil {
					return err
				}
				var names []string
				for _, r := range tc.rails {
					names = append(names, "ib."+r+".rdma_bytes")
				}
				for n, v := range counters(c, names...) {
					if v == 0 {
						return fmt.Errorf("%s = 0: the rail carried no RDMA data", n)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A stack with shared memory and two ib rails: sm is above ib in
// exclusivity.
const localStack = `
job {
  exclusive = %v
}
btl "self" "self" {}
btl "sm" "local" {}
btl "ib" "hca0" {
  device = "hca0"
}
btl "ib" "hca1" {
  device = "hca1"
}
policy "sched" {
  builtin          = "even_striping"
  stripe_threshold = "64KiB"
  min_stripe       = "16KiB"
}
`

// TestALocalPeerUsesSharedMemoryUnlessTheJobSaysOtherwise: as in Open
// MPI, a peer reachable by shared memory does not use the network rails
// (job.exclusive, the default); with exclusive = false every transport
// that reaches it is a subchannel and carries traffic.
func TestALocalPeerUsesSharedMemoryUnlessTheJobSaysOtherwise(t *testing.T) {
	for _, exclusive := range []bool{true, false} {
		t.Run(fmt.Sprintf("exclusive=%v", exclusive), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "local.hcl")
			if err := os.WriteFile(file, []byte(fmt.Sprintf(localStack, exclusive)), 0o644); err != nil {
				t.Fatal(err)
			}
			err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{file}}, func(c *gobtl.Comm) error {
				want := 1
				if !exclusive {
					want = 3
				}
				if w := layers.PML(c).Weights(1 - c.Rank()); len(w) != want {
					return fmt.Errorf("the virtual channel has %d subchannels, want %d", len(w), want)
				}
				if err := exchange(c, sizes); err != nil {
					return err
				}
				for n, v := range counters(c, "ib.hca0.frames_sent", "ib.hca1.frames_sent", "ib.hca0.rdma_bytes", "ib.hca1.rdma_bytes") {
					if exclusive && v != 0 {
						return fmt.Errorf("%s = %d: a local peer's traffic went over the network", n, v)
					}
					if !exclusive && v == 0 {
						return fmt.Errorf("%s = 0: with exclusive = false the rail should carry traffic", n)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
