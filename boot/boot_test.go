package boot_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/launch"
)

// exchange has every rank put its own value, fence, and read everyone's.
func exchange(t *testing.T, bs []core.Bootstrap) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(bs))
	for i, b := range bs {
		wg.Go(func() {
			if err := b.Put("addr", []byte(fmt.Sprint("at-", b.Rank()))); err != nil {
				errs[i] = err
				return
			}
			if err := b.Fence(ctx); err != nil {
				errs[i] = err
				return
			}
			for p := range b.Size() {
				v, err := b.Get(ctx, p, "addr")
				if err != nil {
					errs[i] = err
					return
				}
				if string(v) != fmt.Sprint("at-", p) {
					errs[i] = fmt.Errorf("rank %d got %q from rank %d", b.Rank(), v, p)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestAGroupFenceMakesEveryPutVisible(t *testing.T) {
	bs := boot.Group(5, "g1")
	exchange(t, bs)
	exchange(t, bs) // fences repeat
	if _, err := bs[0].Get(context.Background(), 1, "nothing"); err == nil {
		t.Error("Get of a key nobody put succeeded")
	}
	if _, err := bs[0].Get(context.Background(), 9, "addr"); err == nil {
		t.Error("Get from rank 9 of 5 succeeded")
	}
}

func TestAGroupFenceFailsWhenAMemberCloses(t *testing.T) {
	bs := boot.Group(2, "g2")
	done := make(chan error)
	go func() { done <- bs[0].Fence(context.Background()) }()
	bs[1].(interface{ Close() error }).Close()
	if err := <-done; !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("fence after a member closed: %v", err)
	}
}

// A rank that calls Fence again while it is in the fence gets an error
// at once, and the fence still waits for the others: counted twice, the
// two calls of rank 0 would complete the round without rank 1 (or leave
// one of them alone in the next round, forever — btl/ib's test did so).
func TestARankInAFenceTwiceIsAnErrorNotASecondArrival(t *testing.T) {
	bs := boot.Group(2, "g-twice")
	first := make(chan error, 1)
	go func() { first <- bs[0].Fence(t.Context()) }()
	// The second call may come before the first is in: then it is the
	// one that waits, and the first gets the error.
	second := make(chan error, 1)
	go func() { second <- bs[0].Fence(t.Context()) }()
	var err error
	select {
	case err = <-first:
	case err = <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("neither of rank 0's two calls returned")
	}
	if err == nil || !strings.Contains(err.Error(), "already in this fence") {
		t.Fatalf("rank 0's second call while in the fence: %v", err)
	}
	select {
	case err := <-first:
		t.Fatalf("rank 0 left the fence without rank 1: %v", err)
	case err := <-second:
		t.Fatalf("rank 0 left the fence without rank 1: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := bs[1].Fence(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("rank 0 still waits after rank 1 came")
	}
	// The next round is whole: both ranks, once each.
	exchange(t, bs)
}

func dialAll(t *testing.T, n int, job string) (*launch.Server, []core.Bootstrap) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "boot.sock")
	srv, err := launch.NewServer(path, n, job)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	bs := make([]core.Bootstrap, n)
	for r := range n {
		c, err := boot.Dial(context.Background(), path, r, n, job)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		bs[r] = c
	}
	return srv, bs
}

func TestClientsExchangeThroughTheServer(t *testing.T) {
	_, bs := dialAll(t, 4, "job1")
	exchange(t, bs)
	exchange(t, bs)
}

func TestTheServerRefusesStrangers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boot.sock")
	srv, err := launch.NewServer(path, 2, "job2")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if _, err := boot.Dial(ctx, path, 0, 2, "other-job"); err == nil {
		t.Error("a rank of another job was accepted")
	}
	if _, err := boot.Dial(ctx, path, 0, 3, "job2"); err == nil {
		t.Error("a rank that believes in 3 ranks was accepted by a 2-rank server")
	}
	c, err := boot.Dial(ctx, path, 1, 2, "job2")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := boot.Dial(ctx, path, 1, 2, "job2"); err == nil {
		t.Error("rank 1 connected twice")
	}
}

func TestAFenceFailsWhenTheLauncherGivesUp(t *testing.T) {
	srv, bs := dialAll(t, 2, "job3")
	done := make(chan error)
	go func() { done <- bs[0].Fence(context.Background()) }()
	// Fail may come before or after rank 0 enters the fence; both must fail it.
	srv.Fail("rank 1 was killed by signal 9")
	if err := <-done; !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("fence: %v", err)
	}
}

func TestAFenceFailsWhenAPeerLeaves(t *testing.T) {
	_, bs := dialAll(t, 3, "job4")
	done := make(chan error, 2)
	for r := range 2 {
		go func() { done <- bs[r].Fence(context.Background()) }()
	}
	bs[2].(*boot.Client).Close()
	for range 2 {
		if err := <-done; !errors.Is(err, core.ErrPeerLost) {
			t.Fatalf("fence: %v", err)
		}
	}
}

func TestAFenceEndsWithItsContext(t *testing.T) {
	_, bs := dialAll(t, 2, "job5")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- bs[0].Fence(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("fence: %v", err)
	}
}

func TestFromEnvWithoutALauncherIsNotAnError(t *testing.T) {
	t.Setenv(boot.EnvBoot, "")
	b, ok, err := boot.FromEnv(context.Background())
	if b != nil || ok || err != nil {
		t.Fatalf("FromEnv = %v, %v, %v", b, ok, err)
	}
	t.Setenv(boot.EnvBoot, "/nonexistent.sock")
	t.Setenv(boot.EnvRank, "x")
	if _, ok, err := boot.FromEnv(context.Background()); !ok || err == nil {
		t.Fatalf("a bad rank was accepted: ok=%v err=%v", ok, err)
	}
}

func TestDetectTriesTheBootstrapsInInitsOrder(t *testing.T) {
	gobtlRun := map[string]string{boot.EnvBoot: "/tmp/x.sock", boot.EnvRank: "0", boot.EnvSize: "2", boot.EnvJobID: "j"}
	pmixEnv := map[string]string{"PMIX_NAMESPACE": "ns", "PMIX_RANK": "1"}
	pmiEnv := map[string]string{"PMI_FD": "6", "PMI_RANK": "1", "PMI_SIZE": "4"}
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want boot.Kind
		bad  bool
	}{
		{"gobtl run", gobtlRun, boot.KindLauncher, false},
		{"gobtl run inside an engine's job", merge(pmixEnv, pmiEnv, gobtlRun), boot.KindLauncher, false},
		{"mpirun or srun --mpi=pmix", pmixEnv, boot.KindPMIx, false},
		{"PMIx before PMI", merge(pmiEnv, pmixEnv), boot.KindPMIx, false},
		{"srun --mpi=pmi2 or hydra", pmiEnv, boot.KindPMI, false},
		{"hydra on a port", map[string]string{"PMI_PORT": "h:1", "PMI_ID": "0", "PMI_RANK": "0", "PMI_SIZE": "2"}, boot.KindPMI, false},
		{"PMIx without a rank is not PMIx", merge(pmiEnv, map[string]string{"PMIX_NAMESPACE": "ns"}), boot.KindPMI, false},
		{"PMI without a socket is no engine", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2"}, boot.KindSingleton, false},
		{"alone", nil, boot.KindSingleton, false},
		{"one srun task without PMI", map[string]string{"SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}, boot.KindSingleton, false},
		{"four srun tasks without PMI", map[string]string{"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "2"}, "", true},
	} {
		got, err := boot.Detect(func(k string) string { return tc.env[k] })
		if got != tc.want || (err != nil) != tc.bad {
			t.Errorf("%s: Detect = %q, %v; want %q (error: %v)", tc.name, got, err, tc.want, tc.bad)
		}
	}
}

func TestGroupOnPlacesRanksOnNodes(t *testing.T) {
	bs := boot.GroupOn("g-nodes", core.NewNodeMap([]string{"a", "a", "b", "b"}))
	l := core.LocalityOf(bs[3])
	if l == nil || l.Nodes() != 2 || l.Node(0) != 0 || l.Node(2) != 1 {
		t.Fatalf("locality of a two-node group: %v", l)
	}
	if l := core.LocalityOf(boot.Group(3, "g-one")[0]); l == nil || l.Nodes() != 1 {
		t.Fatalf("a plain group is not on one node: %v", l)
	}
	exchange(t, bs)
}

// The launcher's notice that a rank ended without finalizing reaches the
// other ranks' OnPeerLost, wrapping ErrPeerLost and saying how the rank
// ended: installed before the notice, or after (then at once); a fence in
// progress does not hold it back, and fences still work after it.
func TestTheLaunchersNoticeOfALostRankReachesOnPeerLost(t *testing.T) {
	srv, bs := dialAll(t, 3, "job7")
	type loss struct {
		rank int
		err  error
	}
	got := [3]chan loss{make(chan loss, 4), make(chan loss, 4), make(chan loss, 4)}
	watch := func(r int) {
		bs[r].(core.PeerWatcher).OnPeerLost(func(rank int, err error) { got[r] <- loss{rank, err} })
	}
	watch(0)
	srv.Lost(2, "rank 2 (pid 7) exited with status 0 before Close (without finalizing)")
	check := func(r int) {
		t.Helper()
		select {
		case l := <-got[r]:
			if l.rank != 2 || !errors.Is(l.err, core.ErrPeerLost) || !strings.Contains(l.err.Error(), "rank 2 (pid 7) exited with status 0 before Close") {
				t.Fatalf("rank %d was told: rank %d, %v", r, l.rank, l.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("rank %d was not told of rank 2", r)
		}
	}
	check(0)
	// Rank 1 installs its function after a fence that followed the
	// notice: the notice waits in its client, if it came first.
	exchange(t, bs)
	watch(1)
	check(1)
	select {
	case l := <-got[2]:
		t.Fatalf("rank 2 was told of itself: %v", l.err)
	default:
	}
}

// Finalize is recorded by the launcher before it returns, and ends the
// session: later fences fail with ErrClosed.
func TestFinalizeIsRecordedBeforeItReturns(t *testing.T) {
	srv, bs := dialAll(t, 2, "job8")
	c := bs[1].(*boot.Client)
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if joined, finalized := srv.Ended(1); !joined || !finalized {
		t.Fatalf("after Finalize the launcher has joined %v, finalized %v", joined, finalized)
	}
	if joined, finalized := srv.Ended(0); !joined || finalized {
		t.Fatalf("rank 0, which did not finalize: joined %v, finalized %v", joined, finalized)
	}
	if err := c.Fence(context.Background()); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("a fence after Finalize: %v", err)
	}
}
