package recvbuf

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/btl/ib"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
	// The ib component's default receive-buffer policy, which a JobSpec
	// without a Policy gets, is found by name in the registry.
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
)

// Job is n ranks in this process, each with its ib modules (on its own
// softrc devices) and a communicator.
type Job struct {
	Comms   []*pml.Comm
	Mods    [][]core.Module
	Metrics []*core.Metrics
}

// JobSpec says how to open a job.
type JobSpec struct {
	Ranks int
	// Params of the btl "ib" block, in textual form.
	Params map[string]string
	// Policy builds each rank's receive-buffer policy (nil: the BTL's
	// default).
	Policy func() (core.RecvBuffers, error)
	// PML options (Metrics and Log are filled in).
	Options pml.Options
}

var jobSeq atomic.Int64

// Open opens a job.
func Open(ctx context.Context, s JobSpec) (*Job, error) {
	boots := boot.Group(s.Ranks, fmt.Sprintf("ibtest-%d-%d", os.Getpid(), jobSeq.Add(1)))
	comp, ok := core.Lookup(core.KindBTL, "ib")
	if !ok {
		return nil, fmt.Errorf("recvbuf: the ib BTL is not registered")
	}
	j := &Job{Comms: make([]*pml.Comm, s.Ranks), Mods: make([][]core.Module, s.Ranks), Metrics: make([]*core.Metrics, s.Ranks)}
	for r := 0; r < s.Ranks; r++ {
		p := core.MustParams(ib.Params)
		for k, v := range s.Params {
			if err := p.SetText(k, v); err != nil {
				j.Close()
				return nil, fmt.Errorf("recvbuf: %s: %w", k, err)
			}
		}
		env := core.BTLEnv{Params: p, Boot: boots[r], Clock: core.SystemClock, Log: zerolog.Nop(), Metrics: core.NewMetrics()}
		if s.Policy != nil {
			pol, err := s.Policy()
			if err != nil {
				j.Close()
				return nil, err
			}
			env.RecvBuffers = pol
		}
		mods, err := comp.OpenBTL(env)
		if err != nil {
			j.Close()
			return nil, fmt.Errorf("recvbuf: open rank %d: %w", r, err)
		}
		j.Mods[r], j.Metrics[r] = mods, env.Metrics
	}
	var wg sync.WaitGroup
	for _, b := range boots {
		wg.Add(1)
		go func() { defer wg.Done(); b.Fence(ctx) }()
	}
	wg.Wait()
	for r := 0; r < s.Ranks; r++ {
		o := s.Options
		o.Metrics, o.Log = j.Metrics[r], zerolog.Nop()
		c, err := pml.New(r, s.Ranks, j.Mods[r], o)
		if err != nil {
			j.Close()
			return nil, fmt.Errorf("recvbuf: rank %d: %w", r, err)
		}
		j.Comms[r] = c
	}
	return j, nil
}

// Run runs f on every rank concurrently and returns the first error.
func (j *Job) Run(f func(c *pml.Comm) error) error {
	errs := make([]error, len(j.Comms))
	var wg sync.WaitGroup
	for r, c := range j.Comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(c); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Close closes every communicator — together, as their finalize meets
// in a barrier — and then every module.
func (j *Job) Close() {
	var wg sync.WaitGroup
	for _, c := range j.Comms {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
	for _, ms := range j.Mods {
		for _, m := range ms {
			m.Close()
		}
	}
}
