package ib

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/ib"
	_ "github.com/gobtl/gobtl/btl/ib/simrc"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
	"github.com/gobtl/gobtl/policies/recvbuf/perpeer"
	"github.com/gobtl/gobtl/sim"
)

var simSeq atomic.Int64

// simJob runs body on n ranks over the simulated verbs provider (package
// sim's virtual time, the real ib module and pml) and closes every rank's
// communicator with the collective finalize. It returns each rank's
// metrics.
func simJob(t *testing.T, n int, body func(c *pml.Comm) error) []map[string]any {
	t.Helper()
	s := sim.New(fmt.Sprintf("test-ib-sim-%d-%d", os.Getpid(), simSeq.Add(1)), n, sim.Options{})
	if err := s.Register(); err != nil {
		t.Fatal(err)
	}
	defer s.Unregister()
	comp, ok := core.Lookup(core.KindBTL, "ib")
	if !ok {
		t.Fatal("the ib BTL is not registered")
	}
	comms := make([]*pml.Comm, n)
	s.OnStall(func(err error) {
		for _, c := range comms {
			if c != nil {
				c.Abort(err)
			}
		}
	})
	snaps := make([]map[string]any, n)
	err := s.Run(func(r int) error {
		p := core.MustParams(ib.Params)
		if err := p.SetText("provider", "sim"); err != nil {
			return err
		}
		env := core.BTLEnv{Params: p, Boot: s.Boot(r), Clock: s, Log: zerolog.Nop(), Metrics: core.NewMetrics()}
		pol, err := perpeer.New(core.MustParams(perpeer.Params))
		if err != nil {
			return err
		}
		env.RecvBuffers = pol
		mods, err := comp.OpenBTL(env)
		if err != nil {
			return err
		}
		if err := env.Boot.Fence(context.Background()); err != nil {
			return err
		}
		c, err := pml.New(r, n, mods, pml.Options{Clock: s, Metrics: env.Metrics, Log: zerolog.Nop()})
		if err != nil {
			return err
		}
		comms[r] = c
		if err := body(c); err != nil {
			c.Abort(err)
			c.Close()
			return err
		}
		err = c.Close()
		snaps[r] = env.Metrics.Snapshot()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return snaps
}

// A rank that leaves the finalize barrier closes its device only once its
// own barrier frames have left: at 64 simulated ranks, with rank 0
// connected to every rank and the barrier's other pairs not yet, a frame
// queued behind a connection being set up used to go down with the
// device, and the ranks waiting for it stalled.
func TestTheFinalizeBarrierLosesNoFrameAtSixtyFourSimulatedRanks(t *testing.T) {
	simJob(t, 64, func(c *pml.Comm) error {
		buf := make([]byte, 8)
		if c.Rank() != 0 {
			_, err := c.Recv(buf, 0, 1)
			return err
		}
		var rs []*pml.Request
		for p := 1; p < c.Size(); p++ {
			r, err := c.Isend(buf, p, 1)
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		return c.Waitall(rs, nil)
	})
}
