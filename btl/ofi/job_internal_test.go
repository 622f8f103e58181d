//go:build ofi && cgo

package ofi

import (
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
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
)

// providersHere are the providers that run in user space on loopback
// (testProviders: net is 1.18's native tcp).
var providersHere = []string{"tcp", "sockets", "shm", "net"}

// needProvider skips the test, saying why, when libfabric lacks prov.
func needProvider(t testing.TB, prov string) {
	t.Helper()
	ps, err := Providers(prov)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 {
		t.Skipf("libfabric has no %s provider here (fi_info -p %s)", prov, prov)
	}
}

var jobSeq atomic.Int64

// tjob is n ranks' modules of one provider in this process.
type tjob struct {
	t     testing.TB
	mods  []*Module   // each rank's first module
	rails [][]*Module // each rank's modules
	boots []core.Bootstrap
	met   []*core.Metrics
}

func openTestJob(t testing.TB, prov string, n int, params map[string]string) *tjob {
	t.Helper()
	return openFlowJob(t, prov, n, params, nil)
}

// openFlowJob is openTestJob with each rank's flow-control policy made
// by flow (nil: none).
func openFlowJob(t testing.TB, prov string, n int, params map[string]string, flow func() core.FlowControl) *tjob {
	t.Helper()
	needProvider(t, prov)
	comp, _ := core.Lookup(core.KindBTL, Name)
	boots := boot.Group(n, fmt.Sprintf("ofitest%d-%d", os.Getpid(), jobSeq.Add(1)))
	j := &tjob{t: t, boots: boots}
	for r := range n {
		p, err := core.NewParams(comp.Params)
		if err != nil {
			t.Fatal(err)
		}
		p.SetText("provider", prov)
		for k, v := range params {
			if err := p.SetText(k, v); err != nil {
				t.Fatal(err)
			}
		}
		met := core.NewMetrics()
		env := core.BTLEnv{Params: p, Boot: boots[r], Clock: core.SystemClock, Log: zerolog.Nop(), Metrics: met}
		if flow != nil {
			env.FlowControl = flow()
		}
		mods, err := comp.OpenBTL(env)
		if err != nil {
			t.Fatalf("open rank %d: %v", r, err)
		}
		var rails []*Module
		for _, m := range mods {
			mod := moduleOf(m)
			t.Cleanup(func() { mod.Close() })
			rails = append(rails, mod)
		}
		j.mods = append(j.mods, rails[0])
		j.rails = append(j.rails, rails)
		j.met = append(j.met, met)
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range boots {
		wg.Go(func() { b.Fence(ctx) })
	}
	wg.Wait()
	return j
}

func (j *tjob) progress() int {
	n := 0
	for _, rails := range j.rails {
		for _, m := range rails {
			n += m.Progress()
		}
	}
	return n
}

func (j *tjob) until(what string, cond func() bool) {
	j.t.Helper()
	msgtest.Until(j.t, what, 30*time.Second, cond, j.progress)
}

func (j *tjob) ep(from, to int) core.Endpoint {
	j.t.Helper()
	ep, err := j.mods[from].Endpoint(to)
	if err != nil {
		j.t.Fatal(err)
	}
	return ep
}

// send retries on ErrNoResources, progressing.
func (j *tjob) send(from, to int, h core.Header, pre, data []byte, flags core.SendFlags) {
	j.t.Helper()
	ep := j.ep(from, to)
	err := msgtest.Poll("room to send", 30*time.Second, func() bool {
		err := ep.Send(h, pre, data, flags)
		if err != nil && !errors.Is(err, core.ErrNoResources) {
			j.t.Fatalf("send from %d to %d: %v", from, to, err)
		}
		return err == nil
	}, j.progress)
	if err != nil {
		j.t.Fatal(err)
	}
}

// rdma retries a Put or Get on ErrNoResources.
func (j *tjob) rdma(from, to int, op *core.RDMAOp, put bool) {
	j.t.Helper()
	r := j.ep(from, to).(core.RDMA)
	err := msgtest.Poll("room for rdma", 30*time.Second, func() bool {
		var err error
		if put {
			err = r.Put(op)
		} else {
			err = r.Get(op)
		}
		if err != nil && !errors.Is(err, core.ErrNoResources) {
			j.t.Fatalf("rdma from %d to %d: %v", from, to, err)
		}
		return err == nil
	}, j.progress)
	if err != nil {
		j.t.Fatal(err)
	}
}

// counter reads a module metric of rank r.
func (j *tjob) counter(r int, name string) int64 {
	snap := j.met[r].Snapshot()
	for k, v := range snap {
		if len(k) >= len(name) && k[len(k)-len(name):] == name {
			if c, ok := v.(int64); ok {
				return c
			}
		}
	}
	return -1
}

type doneFunc func(op *core.RDMAOp, err error)

func (f doneFunc) RDMADone(op *core.RDMAOp, err error) { f(op, err) }
