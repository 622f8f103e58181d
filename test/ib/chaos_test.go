package ib

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/bench/patterns"
	"github.com/gobtl/gobtl/btl/ib"
	"github.com/gobtl/gobtl/btl/ib/softrc"
	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment/recvbuf"
	"github.com/gobtl/gobtl/pml"
)

// TestChaos runs NPB patterns over softrc while the wire misbehaves at
// random: packets delayed, packets lost, links broken. Every pattern
// checks every byte of every message it receives. A run either
// completes, or its ranks fail with ErrPeerLost (a broken link) or
// ErrAborted (a rank that failed ended the job, as the launcher does) —
// within the ACK timeout's retries, never a hang, never a wrong byte.
// Each subtest's name carries the seed of its faults, to replay it with
// -run. Bounded: at most twelve runs in about 40 s.
func TestChaos(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 15))
	type fault struct {
		name   string
		breaks bool // the job may fail
		apply  func(rng *rand.Rand, devs []*softrc.Device, ports []uint8) error
	}
	faults := []fault{
		{"delay", false, func(rng *rand.Rand, devs []*softrc.Device, ports []uint8) error {
			r := rng.IntN(len(devs))
			return devs[r].DelayLinks(ports[r], time.Duration(rng.IntN(2000))*time.Microsecond)
		}},
		{"loss", false, func(rng *rand.Rand, devs []*softrc.Device, ports []uint8) error {
			r := rng.IntN(len(devs))
			return devs[r].DropPackets(ports[r], 20+rng.IntN(200))
		}},
		{"break", true, func(rng *rand.Rand, devs []*softrc.Device, ports []uint8) error {
			r := rng.IntN(len(devs))
			_, err := devs[r].DropLinks(ports[r], verbs.GID{}, 0)
			return err
		}},
	}
	// The job has no self BTL: patterns whose ranks send to themselves
	// (cg on 4 ranks) cannot run on it.
	pats := []string{"lu", "is", "mg"}
	deadline := time.Now().Add(40 * time.Second)
	for i := 0; time.Now().Before(deadline) && i < 12; i++ {
		f, pat := faults[i%len(faults)], pats[rng.IntN(len(pats))]
		runSeed := rng.Uint64()
		t.Run(fmt.Sprintf("%s/%s/seed=%d", f.name, pat, runSeed), func(t *testing.T) {
			chaos(t, pat, f.breaks, rand.New(rand.NewPCG(runSeed, 15)), f.apply)
		})
	}
}

func chaos(t *testing.T, pat string, mayFail bool, rng *rand.Rand, apply func(*rand.Rand, []*softrc.Device, []uint8) error) {
	const n = 4
	// An ACK timeout of 4.096 µs × 2^15 ≈ 134 ms, seven retries: a QP
	// whose peer is gone fails within about a second. (2^12, 17 ms, is
	// shorter than a large read response takes on a loaded two-core
	// machine: the requester's retries ran out with the response queued.)
	j, err := recvbuf.Open(context.Background(), recvbuf.JobSpec{Ranks: n,
		Params:  map[string]string{"timeout": "15", "retry_count": "7"},
		Options: pml.Options{FinalizeTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	devs, ports := make([]*softrc.Device, n), make([]uint8, n)
	for r := range n {
		if devs[r], ports[r], err = ib.Faults(j.Mods[r][0]); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(1+rng.IntN(20)) * time.Millisecond):
			}
			if err := apply(rng, devs, ports); err != nil {
				t.Error(err)
				return
			}
		}
	})
	errs := make([]error, n)
	var ranks sync.WaitGroup
	for r, c := range j.Comms {
		ranks.Go(func() {
			_, errs[r] = patterns.Run(c, pat, patterns.Options{Iters: 3, Scale: 0.05})
			if errs[r] != nil {
				// A failed rank ends the job, as the launcher would.
				for _, o := range j.Comms {
					o.Abort(errs[r])
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { ranks.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(stop)
		t.Fatalf("the job hangs under %s", t.Name())
	}
	close(stop)
	faults.Wait()
	failed := 0
	for r, err := range errs {
		switch {
		case err == nil:
		case !mayFail:
			t.Errorf("rank %d failed although the wire only delayed or lost packets: %v", r, err)
		case errors.Is(err, core.ErrPeerLost) || errors.Is(err, core.ErrAborted):
			failed++
		default:
			t.Errorf("rank %d: %v, want success, ErrPeerLost or ErrAborted", r, err)
		}
	}
	var drops, breaks int64
	for _, d := range devs {
		s := d.Stats()
		drops += s.FaultDrops
		breaks += s.LinkFailures
	}
	t.Logf("%d of %d ranks failed; %d packets lost, %d links broken", failed, n, drops, breaks)
}
