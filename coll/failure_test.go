package coll_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// TestARankLostDuringACollectiveFailsItOnTheOthers: the last rank of the
// job dies — its connections to every other rank drop — while the others
// are inside a collective, some of them waiting on ranks that are alive
// but will never send, because they lost it. Every survivor's collective
// fails with ErrPeerLost; none hangs.
func TestARankLostDuringACollectiveFailsItOnTheOthers(t *testing.T) {
	big := 64 << 10
	for _, tc := range []struct {
		name string
		op   func(c *coll.Comm, buf []byte) error
	}{
		{"allreduce ring", func(c *coll.Comm, buf []byte) error { return c.Allreduce(bg, buf, buf, sumInt64) }},
		{"allreduce recursive doubling", func(c *coll.Comm, buf []byte) error { return c.Allreduce(bg, buf[:8], buf[:8], sumInt64) }},
		{"bcast", func(c *coll.Comm, buf []byte) error { return c.Bcast(bg, buf, 0) }},
		{"barrier", func(c *coll.Comm, _ []byte) error { return c.Barrier(bg) }},
		{"alltoall", func(c *coll.Comm, buf []byte) error {
			return c.Alltoall(bg, buf, make([]byte, len(buf)), len(buf)/c.Size())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 5
			tu := forced("allreduce", "ring", 0)
			j := newJob(t, n, tu, func(o *pml.Options) { o.FinalizeTimeout = 100 * time.Millisecond })
			defer j.close()
			j.run(t, func(c *coll.Comm) error {
				buf := make([]byte, big)
				if c.Rank() == n-1 {
					// A few rounds, then death in the middle of the
					// next: its links drop while the others wait.
					for range 3 {
						if err := tc.op(c, buf); err != nil {
							return err
						}
					}
					for r := range n - 1 {
						j.f.Drop(0, n-1, r)
					}
					return nil
				}
				for i := 0; ; i++ {
					err := tc.op(c, buf)
					if err == nil {
						if i > 1000 {
							return errors.New("the collective kept succeeding without a rank")
						}
						continue
					}
					if !errors.Is(err, core.ErrPeerLost) {
						return fmt.Errorf("failed with %v, want ErrPeerLost", err)
					}
					return nil
				}
			})
		})
	}
}
