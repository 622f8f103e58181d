package extoll

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	bootstrap "github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/pml"
)

// The test binary is also the rank program of TestRanksThatAreProcesses.
func TestMain(m *testing.M) { mptest.Main(m, map[string]func() int{"exchange": exchangeRank}, nil) }

// Ranks that are separate processes, started by the launcher, exchange
// messages of every size over each transport: mailboxes mapped from
// /dev/shm, and TCP. Every job has a job id of its own, so two test runs
// on one host do not meet in /dev/shm or on a socket.
func TestRanksThatAreProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, tc := range []struct{ transport, policy string }{{"shm", "extoll_dynamic"}, {"tcp", "extoll_static"}} {
		t.Run(tc.transport+"/"+tc.policy, func(t *testing.T) {
			const n = 4
			res := mptest.Job{NP: n, Role: "exchange", Timeout: time.Minute,
				Env: []string{"EXTOLL_TEST_TRANSPORT=" + tc.transport, "EXTOLL_TEST_POLICY=" + tc.policy}}.Run(t)
			if res.Failed() || strings.Count(res.Stdout, " exchanged ") != n {
				t.Fatalf("not every rank exchanged its messages:\n%s", res)
			}
		})
	}
}

// exchangeRank is one rank of TestRanksThatAreProcesses: every rank sends
// every rank messages of every size class, all in flight at once.
func exchangeRank() int {
	if err := exchange(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: %v\n", os.Getenv(bootstrap.EnvRank), err)
		return 1
	}
	return 0
}

func exchange() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, _, err := bootstrap.FromEnv(ctx)
	if err != nil {
		return err
	}
	rank, size := b.Rank(), b.Size()
	comp, _ := core.Lookup(core.KindBTL, Name)
	p := core.MustParams(comp.Params)
	if err := p.SetText("transport", os.Getenv("EXTOLL_TEST_TRANSPORT")); err != nil {
		return err
	}
	if err := p.SetText("slots_per_peer", "16"); err != nil {
		return err
	}
	pc, ok := core.Lookup(core.KindFlowControl, os.Getenv("EXTOLL_TEST_POLICY"))
	if !ok {
		return fmt.Errorf("no flow_control policy %q", os.Getenv("EXTOLL_TEST_POLICY"))
	}
	pol, err := pc.NewPolicy(core.MustParams(pc.Params))
	if err != nil {
		return err
	}
	key, err := core.ExchangeJobKey(ctx, b)
	if err != nil {
		return err
	}
	mods, err := comp.OpenBTL(core.BTLEnv{Instance: "p", Params: p, Boot: b, Clock: core.SystemClock,
		Metrics: core.NewMetrics(), FlowControl: pol.(core.FlowControl), JobKey: key})
	if err != nil {
		return err
	}
	// The modex: every rank's address is published before any connects.
	if err := b.Fence(ctx); err != nil {
		return err
	}
	c, err := pml.New(rank, size, mods, pml.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := allPairs(c, []int{0, 7, 2048, 3000, 1 << 20}); err != nil {
		return err
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	fmt.Printf("rank %d exchanged its messages\n", rank)
	// A rank that joined the launcher's job ends by finalizing, or the
	// launcher fails the job.
	if err := c.Close(); err != nil {
		return err
	}
	return b.Finalize()
}
