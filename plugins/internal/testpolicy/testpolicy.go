// Package testpolicy is a policy for gobtl's own tests, of every kind,
// that misbehaves on request (the mode parameter), so that the host's
// handling of dead, hung, panicking and lying plugins can be tested
// against a real process. Command testplugins/testpolicy serves it as a
// plugin.
package testpolicy

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
)

var params = []core.Param{
	{Name: "mode", Type: core.ParamString, Default: "echo", Enum: []string{"echo", "good", "bad", "hang", "crash", "panic", "refuse", "silent", "chatty"},
		Doc: "echo: one decision per event carrying its value; good: a well-behaved policy; bad: invalid decisions; " +
			"hang, crash, panic: misbehave after `after` batches; refuse: refuse every Setup; silent: never decide; " +
			"chatty: echo, printing a line per batch on stdout"},
	{Name: "after", Type: core.ParamInt, Default: "0", Doc: "batches answered before hang, crash or panic"},
	{Name: "before", Type: core.ParamString, Default: "echo", Enum: []string{"echo", "good"}, Doc: "how hang, crash and panic answer until they trip"},
	{Name: "credit_slots", Type: core.ParamInt, Default: "1",
		Doc: "the credit slots per peer a flow-control Setup gives a slot pool (EXTOLL's mailbox); tests give 0, which EXTOLL refuses"},
	{Name: "step", Type: core.ParamInt, Default: "1", Doc: "must be positive (tests the plugin-side Check)",
		Check: func(v any) error {
			if v.(int64) <= 0 {
				return errors.New("step must be positive")
			}
			return nil
		}},
}

type base struct {
	mode    string
	answer  string // how Observe answers: echo, good, bad or silent
	after   int
	batches int
}

// trip misbehaves once `after` batches have been answered.
func (b *base) trip() {
	b.batches++
	if b.mode == "chatty" {
		fmt.Printf("testpolicy: batch %d\n", b.batches)
	}
	if b.batches <= b.after {
		return
	}
	switch b.mode {
	case "hang":
		select {}
	case "crash":
		os.Exit(3)
	case "panic":
		panic("testpolicy: panic on request")
	}
}

func newBase(p core.Params) base {
	sdk.Logger().Info("testpolicy configured", "mode", p.String("mode"), "after", p.Int("after"))
	b := base{mode: p.String("mode"), answer: p.String("mode"), after: p.Int("after")}
	switch b.mode {
	case "hang", "crash", "panic":
		b.answer = p.String("before")
	case "chatty":
		b.answer = "echo"
	}
	return b
}

var errRefused = errors.New("testpolicy refuses this setup")

type flow struct {
	base
	setup       core.FlowSetup
	creditSlots int
}

func (f *flow) Setup(info core.FlowInfo) (core.FlowSetup, error) {
	if f.mode == "refuse" {
		return core.FlowSetup{}, errRefused
	}
	f.setup = core.FlowSetup{Scheme: core.FlowCredits, Quota: 2, MaxQuota: 16, CreditThreshold: 1}
	if info.Resource == core.ResourceSlotPool {
		f.setup.CreditSlots = f.creditSlots // seed 003 Equation 2: one per sender
	}
	if info.Buffers > 0 && info.Senders > 0 {
		// An equal share of what is left for data, so that all senders at
		// their maximum never exceed it.
		f.setup.MaxQuota = max(2, (info.Buffers-f.setup.CreditSlots*info.Senders)/info.Senders)
	}
	return f.setup, nil
}

func (f *flow) Observe(es []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	if len(es) > 0 {
		f.trip()
	}
	for _, e := range es {
		switch f.answer {
		case "echo":
			out = append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: e.Peer, Value: e.Value})
		case "good":
			if e.Kind == core.FlowBacklogged {
				out = append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: e.Peer, Value: int64(min(int(e.Quota)+1, f.setup.MaxQuota))})
			}
		case "bad":
			out = append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: e.Peer, Value: int64(f.setup.MaxQuota) * 10})
		}
	}
	return out
}

type recv struct {
	base
	queues int
}

func (r *recv) Setup(info core.RecvInfo) (core.RecvSetup, error) {
	if r.mode == "refuse" {
		return core.RecvSetup{}, errRefused
	}
	s := core.RecvSetup{Queues: []core.QueueSpec{
		{Kind: core.QueuePerPeer, BufSize: 128, Count: 4, Low: 2, Max: 8},
		{Kind: core.QueueShared, BufSize: max(256, info.EagerLimit), Count: 64, Low: 16, Max: 256},
	}, SendFreeListMax: 256}
	r.queues = len(s.Queues)
	return s, nil
}

func (r *recv) Observe(es []core.RecvEvent, out []core.RecvDecision) []core.RecvDecision {
	if len(es) > 0 {
		r.trip()
	}
	for _, e := range es {
		switch r.answer {
		case "echo":
			out = append(out, core.RecvDecision{Kind: core.RecvGrow, Queue: e.Queue, Value: e.Value})
		case "good":
			if e.Kind == core.RecvLimit || e.Kind == core.RecvExhausted {
				out = append(out, core.RecvDecision{Kind: core.RecvGrow, Queue: e.Queue, Value: 8})
			}
		case "bad":
			out = append(out, core.RecvDecision{Kind: core.RecvGrow, Queue: int32(r.queues + 3), Value: -1})
		}
	}
	return out
}

type sched struct {
	base
	subs map[int32]int
}

func (s *sched) Setup(info core.SchedInfo) (core.SchedSetup, error) {
	if s.mode == "refuse" {
		return core.SchedSetup{}, errRefused
	}
	n := len(info.Subchannels)
	if n == 0 {
		return core.SchedSetup{}, errors.New("no subchannels")
	}
	s.subs[int32(info.Peer)] = n
	w := make([]float64, n)
	for i := range w {
		w[i] = 1 / float64(n)
	}
	return core.SchedSetup{Small: core.SchedRoundRobin, Large: core.SchedWeightedStriping, StripeThreshold: 16 << 10,
		MinStripe: 4 << 10, Window: 1, Weights: w, TotalWeight: 1}, nil
}

func (s *sched) Observe(es []core.SchedEvent, out []core.SchedDecision) []core.SchedDecision {
	if len(es) > 0 {
		s.trip()
	}
	for _, e := range es {
		switch s.answer {
		case "echo":
			out = append(out, core.SchedDecision{Kind: core.SchedSetWeight, Peer: e.Peer, Sub: e.Sub, Weight: float64(e.Bytes)})
		case "good":
			if e.Last && e.Time > 0 {
				// Weight each subchannel by the bandwidth it just showed.
				for sub := 0; sub < s.subs[e.Peer]; sub++ {
					w := 1.0
					if int32(sub) == e.Sub {
						w = 1 + float64(e.Bytes)/float64(e.Time)
					}
					out = append(out, core.SchedDecision{Kind: core.SchedSetWeight, Peer: e.Peer, Sub: int32(sub), Weight: w})
				}
			}
		case "bad":
			out = append(out, core.SchedDecision{Kind: core.SchedSetWeight, Peer: e.Peer, Sub: e.Sub, Weight: math.Inf(-1)})
		}
	}
	return out
}

// Plugin describes the policy for sdk.Serve. Installed as
// testpolicy-<kind>, the plugin serves that kind only: the tests of a
// plugin named for the wrong kind use it.
func Plugin() sdk.Plugin {
	p := sdk.Plugin{
		Name:    "testpolicy",
		Version: "0.0.1-test",
		Doc:     "gobtl's test policy plugin",
		Params:  params,
		NewFlowControl: func(p core.Params) (core.FlowControl, error) {
			return &flow{base: newBase(p), creditSlots: p.Int("credit_slots")}, nil
		},
		NewRecvBuffers: func(p core.Params) (core.RecvBuffers, error) {
			return &recv{base: newBase(p)}, nil
		},
		NewScheduler: func(p core.Params) (core.Scheduler, error) {
			return &sched{base: newBase(p), subs: map[int32]int{}}, nil
		},
	}
	switch strings.TrimPrefix(filepath.Base(os.Args[0]), "testpolicy-") {
	case "flow_control":
		p.NewRecvBuffers, p.NewScheduler = nil, nil
	case "recvbuf":
		p.NewFlowControl, p.NewScheduler = nil, nil
	case "sched":
		p.NewFlowControl, p.NewRecvBuffers = nil, nil
	}
	return p
}
