package pmi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot/pmi"
	"github.com/gobtl/gobtl/core"
)

// start connects size ranks to e over socketpairs, each rank's handshake
// running while the others' do, as they would under an engine.
func start(t *testing.T, e *engine, version int) []*pmi.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := make([]*pmi.Client, e.size)
	errs := make([]error, e.size)
	var wg sync.WaitGroup
	for r := range e.size {
		srv, cli := socketpair(t)
		go e.serve(conn(t, srv), r)
		c := conn(t, cli)
		wg.Go(func() {
			cs[r], errs[r] = pmi.Connect(ctx, c, pmi.Env{FD: -1, Rank: r, Size: e.size, ID: r, Version: version})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return cs
}

// each runs f on every rank at once and fails on the first error.
func each(t *testing.T, cs []*pmi.Client, f func(ctx context.Context, c *pmi.Client) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = f(ctx, c) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// value is rank r's value for key k: long enough, for some keys, to span
// many PMI values.
func value(r int, k string, n int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("%d:%s|", r, k)), n)
}

func TestRanksExchangeLongValuesThroughTheEngine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noV2    bool
		version int
		want    int
	}{
		{"PMI-2", false, 0, 2},
		{"PMI-1 when the engine refuses PMI-2", true, 0, 1},
		{"PMI-1 when asked for", false, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, 4)
			e.noV2 = tc.noV2
			cs := start(t, e, tc.version)
			for _, c := range cs {
				if c.Version() != tc.want || c.JobID() != e.job {
					t.Fatalf("rank %d speaks PMI-%d in job %q, want PMI-%d in %q", c.Rank(), c.Version(), c.JobID(), tc.want, e.job)
				}
			}
			sizes := map[string]int{"short": 1, "long": 2000, "empty": 0}
			for round := range 2 {
				each(t, cs, func(ctx context.Context, c *pmi.Client) error {
					for k, n := range sizes {
						if err := c.Put(fmt.Sprint(k, round), value(c.Rank(), k, n)); err != nil {
							return err
						}
					}
					return c.Fence(ctx)
				})
				each(t, cs, func(ctx context.Context, c *pmi.Client) error {
					for p := range c.Size() {
						for k, n := range sizes {
							v, err := c.Get(ctx, p, fmt.Sprint(k, round))
							if err != nil {
								return err
							}
							if !bytes.Equal(v, value(p, k, n)) {
								return fmt.Errorf("rank %d got %d bytes for rank %d's %s, want %d", c.Rank(), len(v), p, k, len(value(p, k, n)))
							}
						}
					}
					if _, err := c.Get(ctx, (c.Rank()+1)%c.Size(), "nothing"); err == nil {
						return fmt.Errorf("rank %d: a key nobody put was found", c.Rank())
					}
					return nil
				})
			}
			// A rank with nothing to say still fences.
			each(t, cs, func(ctx context.Context, c *pmi.Client) error { return c.Fence(ctx) })
			each(t, cs, func(ctx context.Context, c *pmi.Client) error {
				_, err := c.Get(ctx, 0, "long1")
				return err
			})
			each(t, cs, func(context.Context, *pmi.Client) error { return nil })
			e.check()
		})
	}
}

func TestLocalityComesFromTheProcessMapping(t *testing.T) {
	for _, tc := range []struct {
		mapping string
		want    core.NodeMap
	}{
		{"(vector,(0,2,2))", core.NodeMap{0, 0, 1, 1}},
		{"(vector,(0,2,1))", core.NodeMap{0, 1, 0, 1}},           // cyclic: the block repeats
		{"(vector, (3,1,3), (7,1,1))", core.NodeMap{0, 0, 0, 1}}, // the engine's numbering is renumbered
		{"", core.NodeMap{0, 0, 0, 0}},                           // no mapping: host names, all this host
		{"(vector,(0,1,0))", core.NodeMap{0, 0, 0, 0}},           // a mapping that places nobody: host names
	} {
		t.Run(tc.mapping, func(t *testing.T) {
			e := newEngine(t, 4)
			e.mapping = tc.mapping
			for _, c := range start(t, e, 0) {
				got := make(core.NodeMap, c.Size())
				for r := range got {
					got[r] = c.Node(r)
				}
				if !slices.Equal(got, tc.want) || c.Nodes() != tc.want.Nodes() {
					t.Errorf("rank %d: nodes %v (%d), want %v", c.Rank(), got, c.Nodes(), tc.want)
				}
			}
			e.check()
		})
	}
}

func TestAbortReachesTheEngine(t *testing.T) {
	for _, version := range []int{2, 1} {
		t.Run(fmt.Sprint("PMI-", version), func(t *testing.T) {
			e := newEngine(t, 2)
			cs := start(t, e, version)
			if err := cs[1].Abort(7, "rank 1; gave up\nbadly"); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				e.mu.Lock()
				n := len(e.aborts)
				e.mu.Unlock()
				if n > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			want := "1 7 TRUE rank_1__gave_up_badly"
			if version == 1 {
				want = "1 7  rank_1__gave_up_badly"
			}
			if len(e.aborts) != 1 || e.aborts[0] != want {
				t.Errorf("the engine saw aborts %q, want [%q]", e.aborts, want)
			}
		})
	}
}

func TestFinalizeEndsTheSessionCleanly(t *testing.T) {
	e := newEngine(t, 2)
	cs := start(t, e, 0)
	each(t, cs, func(ctx context.Context, c *pmi.Client) error { return c.Finalize() })
	e.mu.Lock()
	slices.Sort(e.finals)
	if !slices.Equal(e.finals, []int{0, 1}) {
		t.Errorf("finalized ranks %v, want [0 1]", e.finals)
	}
	e.mu.Unlock()
	if err := cs[0].Put("k", nil); !errors.Is(err, core.ErrClosed) {
		t.Errorf("Put after Finalize: %v", err)
	}
	if err := cs[0].Finalize(); err != nil {
		t.Errorf("a second Finalize: %v", err)
	}
}

func TestAFenceFailsWhenTheEngineGoesAway(t *testing.T) {
	e := newEngine(t, 1)
	srv, cli := socketpair(t)
	s := conn(t, srv)
	go e.serve(s, 0)
	c, err := pmi.Connect(context.Background(), conn(t, cli), pmi.Env{Rank: 0, Size: 1, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := c.Fence(context.Background()); !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("fence with the engine gone: %v", err)
	}
	if err := c.Put("k", nil); err == nil {
		t.Error("a broken session took a Put")
	}
}

func TestAFenceEndsWithItsContext(t *testing.T) {
	e := newEngine(t, 2)
	cs := start(t, e, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- cs[0].Fence(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("fence: %v", err)
	}
}

func TestFromEnvUsesTheInheritedSocket(t *testing.T) {
	e := newEngine(t, 1)
	e.mapping = "(vector,(0,1,1))"
	srv, cli := socketpair(t)
	go e.serve(conn(t, srv), 0)
	t.Setenv(pmi.EnvFD, fmt.Sprint(cli.Fd()))
	t.Setenv(pmi.EnvRank, "0")
	t.Setenv(pmi.EnvSize, "1")
	t.Setenv(pmi.EnvPort, "")
	t.Setenv(pmi.EnvID, "")
	t.Setenv(pmi.EnvVersion, "")
	c, err := pmi.FromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put("a", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := c.Fence(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	e.check()
}

func TestParseEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want pmi.Env
		bad  bool
	}{
		{"an inherited socket", map[string]string{"PMI_FD": "6", "PMI_RANK": "1", "PMI_SIZE": "4"},
			pmi.Env{FD: 6, Rank: 1, Size: 4, ID: 1}, false},
		{"a port and an id, with Slurm's job id", map[string]string{"PMI_PORT": "h:5", "PMI_RANK": "1", "PMI_SIZE": "2", "PMI_ID": "9", "PMI_JOBID": "12.0"},
			pmi.Env{FD: -1, Port: "h:5", Rank: 1, Size: 2, ID: 9, JobID: "12.0"}, false},
		{"a forced version", map[string]string{"PMI_FD": "3", "PMI_RANK": "0", "PMI_SIZE": "1", "GOBTL_PMI_VERSION": "1"},
			pmi.Env{FD: 3, Rank: 0, Size: 1, Version: 1}, false},
		{"a rank past the size", map[string]string{"PMI_FD": "3", "PMI_RANK": "2", "PMI_SIZE": "2"}, pmi.Env{}, true},
		{"no socket", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "1"}, pmi.Env{}, true},
		{"a word for a size", map[string]string{"PMI_FD": "3", "PMI_RANK": "0", "PMI_SIZE": "two"}, pmi.Env{}, true},
		{"version 3", map[string]string{"PMI_FD": "3", "PMI_RANK": "0", "PMI_SIZE": "1", "GOBTL_PMI_VERSION": "3"}, pmi.Env{}, true},
	} {
		got, err := pmi.ParseEnv(func(k string) string { return tc.env[k] })
		if tc.bad != (err != nil) || !tc.bad && got != tc.want {
			t.Errorf("%s: ParseEnv = %+v, %v; want %+v, error %v", tc.name, got, err, tc.want, tc.bad)
		}
		if !tc.bad && !pmi.Present(func(k string) string { return tc.env[k] }) {
			t.Errorf("%s: Present is false", tc.name)
		}
	}
	if pmi.Present(func(k string) string { return map[string]string{"PMI_RANK": "0", "PMI_SIZE": "1"}[k] }) {
		t.Error("Present without a socket")
	}
}
