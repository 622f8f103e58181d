package shm_test

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/coll/shm"
)

// A barrier and an 8-byte allreduce through the segment allocate nothing
// once warm, on any rank — whether their waits end in the spin or go to
// the PML (AllocsPerRun runs on one CPU, where a rank that waits for
// another mostly does).
func TestABarrierAndASmallAllreduceAllocateNothing(t *testing.T) {
	for _, spin := range []int{4096, -1} {
		t.Run(fmt.Sprint("spin ", spin), func(t *testing.T) {
			const n = 2
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
			j := newJob(t, n, forceAll(nil, func(o shm.Options) shm.Options { o.Spin = spin; return o }))
			defer j.close()
			sum := coll.Sum[float64]()
			j.run(t, func(c *coll.Comm) error {
				sbuf, rbuf := []float64{1}, make([]float64, 1)
				var err error
				step := func() {
					if e := c.Allreduce(bg, coll.Bytes(sbuf), coll.Bytes(rbuf), sum); e != nil && err == nil {
						err = e
					}
					if e := c.Barrier(bg); e != nil && err == nil {
						err = e
					}
				}
				for range 50 {
					step()
				}
				// Every rank runs as many: AllocsPerRun runs one more than
				// asked. The least of three counts must be 0 (a goroutine
				// of the runtime may allocate during one).
				if c.Rank() != 0 {
					for range 3 * 21 {
						step()
					}
					return err
				}
				least := math.Inf(1)
				for range 3 {
					least = min(least, testing.AllocsPerRun(20, step))
				}
				if err != nil {
					return err
				}
				if rbuf[0] != 2 {
					return fmt.Errorf("allreduce gave %v", rbuf[0])
				}
				if least != 0 {
					return fmt.Errorf("an 8-byte allreduce and a barrier allocate %v times", least)
				}
				if calls(c, "allreduce", "shm") == 0 || calls(c, "barrier", "shm") == 0 {
					return fmt.Errorf("they did not go through the component")
				}
				return nil
			})
		})
	}
}
