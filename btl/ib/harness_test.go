package ib

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/gobtl/gobtl/policies/recvbuf"
	// The component's default receive-buffer policy, found by name.
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
)

var jobSeq atomic.Int64

// newBoots returns the bootstraps of an n-rank job in this process (Puts
// are visible after a Fence).
func newBoots(n int) []core.Bootstrap {
	return boot.Group(n, fmt.Sprintf("ibtest-%d-%d", os.Getpid(), jobSeq.Add(1)))
}

// job is n ranks of the ib BTL in this process, each on its own softrc
// host.
type job struct {
	t       tb
	mods    []*module
	metrics []*core.Metrics
	got     [][]frame
}

// tb is what the job needs of a test: testing.TB, or a rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type frame struct {
	h core.Header
	p []byte
}

const testType = core.TypeUserBase

type jobOpts struct {
	params map[string]string
	policy func() core.RecvBuffers
	flow   func() core.FlowControl
	clock  core.Clock // nil: the system clock
}

// layout is a receive-buffer policy for jobOpts.policy, built by a
// layout's New from its schema's defaults with the name/value pairs of
// set applied.
func layout(t tb, build func(core.Params) (*recvbuf.Fixed, error), schema []core.Param, set ...string) func() core.RecvBuffers {
	return func() core.RecvBuffers {
		ps := core.MustParams(schema)
		for i := 0; i+1 < len(set); i += 2 {
			if err := ps.SetText(set[i], set[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		p, err := build(ps)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// openBTL opens the component as a job does, through core's registry,
// which gives it its default policies.
func openBTL(env core.BTLEnv) ([]core.Module, error) {
	c, ok := core.Lookup(core.KindBTL, "ib")
	if !ok {
		return nil, errors.New("btl ib is not registered")
	}
	return c.OpenBTL(env)
}

func openJob(t testing.TB, n int, o jobOpts) *job {
	t.Helper()
	boots := newBoots(n)
	j := &job{t: t, got: make([][]frame, n)}
	for r := 0; r < n; r++ {
		p := core.MustParams(Params)
		for k, v := range o.params {
			if err := p.SetText(k, v); err != nil {
				t.Fatalf("param %s: %v", k, err)
			}
		}
		env := core.BTLEnv{Params: p, Boot: boots[r], Clock: core.SystemClock, Log: zerolog.Nop(), Metrics: core.NewMetrics()}
		if o.clock != nil {
			env.Clock = o.clock
		}
		if o.policy != nil {
			env.RecvBuffers = o.policy()
		}
		if o.flow != nil {
			env.FlowControl = o.flow()
		}
		mods, err := openBTL(env)
		if err != nil {
			t.Fatalf("open rank %d: %v", r, err)
		}
		m := mods[0].(*module)
		for _, x := range mods[1:] {
			t.Cleanup(func() { x.Close() })
		}
		j.mods = append(j.mods, m)
		j.metrics = append(j.metrics, env.Metrics)
		rank := r
		if err := m.Register(testType, func(h *core.Header, p []byte) {
			j.got[rank] = append(j.got[rank], frame{*h, append([]byte(nil), p...)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(j.close)
	fence(boots)
	return j
}

// fence runs the bootstraps' fence together.
func fence(boots []core.Bootstrap) {
	var wg sync.WaitGroup
	for _, b := range boots {
		wg.Add(1)
		go func() { defer wg.Done(); b.Fence(context.Background()) }()
	}
	wg.Wait()
}

// close closes every module at once, as the ranks of a job end (again
// is harmless): a module's goodbye waits for its peers' answers, which
// they give only while they progress — one after the other, each would
// wait out its deadline, which a manual clock never reaches.
func (j *job) close() {
	var wg sync.WaitGroup
	for _, m := range j.mods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Close()
		}()
	}
	wg.Wait()
}

func (j *job) progress() int {
	n := 0
	for _, m := range j.mods {
		n += m.Progress()
	}
	return n
}

func (j *job) until(what string, cond func() bool) {
	j.t.Helper()
	msgtest.Until(j.t, what, 20*time.Second, cond, j.progress)
}

func (j *job) ep(from, to int) *endpoint {
	j.t.Helper()
	e, err := j.mods[from].Endpoint(to)
	if err != nil {
		j.t.Fatal(err)
	}
	return e.(*endpoint)
}

// send retries on ErrNoResources, progressing every rank in between.
func (j *job) send(from, to int, h core.Header, data []byte) {
	j.t.Helper()
	retry(j.t, fmt.Sprintf("send %d bytes %d→%d", len(data), from, to), func() error {
		return j.ep(from, to).Send(h, nil, data, 0)
	}, j.progress)
}

// retry calls op until it is not refused for resources, calling
// progress in between. Another error fails the test at once, and so does
// a refusal that lasts 20 s: a test never waits without bound.
func retry(t tb, what string, op func() error, progress func() int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, core.ErrNoResources) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		progress()
	}
}

func fill(b []byte, seed int) []byte {
	for i := range b {
		b[i] = byte(seed*31 + i*7)
	}
	return b
}

func (j *job) checkFrames(rank int, want [][]byte) {
	j.t.Helper()
	if len(j.got[rank]) != len(want) {
		j.t.Fatalf("rank %d got %d frames, want %d", rank, len(j.got[rank]), len(want))
	}
	for _, f := range j.got[rank] {
		i := int(f.h.Tag)
		if !bytes.Equal(f.p, want[i]) {
			j.t.Fatalf("rank %d: frame %d (%d bytes) differs", rank, i, len(want[i]))
		}
	}
}
