// Package conformance is the suite every policy plugin must pass, run by
// `gobtl plugins verify PATH` (Verify, a plain library: it returns a
// Report) and, for a third party's own plugin, from go test through
// package conformancetest:
//
//	func TestMyPolicyConforms(t *testing.T) {
//		conformancetest.Run(t, "./bin/mypolicy", conformance.Options{})
//	}
//
// For each policy kind the plugin serves, the suite starts the plugin
// through gobtl's own host (so it tests the plugin exactly as a job runs
// it), sets it up as transports would, and drives it with random event
// streams from a model of the mechanism, which applies the decisions that
// come back the way the real mechanism does. Every decision is checked
// against the invariants the mechanism relies on (ARCHITECTURE.md, "policy
// proposes, mechanism disposes"):
//
//   - flow control: a credit threshold no larger than the initial credits
//     (else credits never return: deadlock), no more buffers promised than
//     exist (no credit beyond what is posted), posted counts within the
//     range the policy declared, no decision for a peer that does not exist;
//   - receive buffers: queues sorted by size, the largest holding the
//     eager limit, growth and limits within each queue's bounds;
//   - scheduling: weights finite, non-negative, normalised (they sum to
//     TotalWeight at Setup, and any set of proposed weights can be
//     normalised), subchannels and peers that exist;
//   - every batch of events answered within a deadline.
//
// Then it kills the plugin with SIGKILL mid-stream and checks that the
// host notices and falls back without blocking, and starts it again to
// check that a restarted plugin works (no state left behind).
//
// The mechanism clamps what it can, so these checks are stricter than
// what merely keeps a job alive: they are what a correct policy never
// needs the clamp for.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
	"github.com/rs/zerolog"
)

// Options tune a run. The zero value is a sensible default.
type Options struct {
	// Params are values for the plugin's HCL body, as text ("12KiB").
	Params map[string]string
	// Events per random stream (default 20000).
	Events int
	// Seed makes the streams reproducible (default 1).
	Seed uint64
	// Deadline is how long a batch may go unanswered (default 1s).
	Deadline time.Duration
	// Log receives the host's and the plugin's log (default: discarded).
	Log *zerolog.Logger
}

func (o *Options) defaults() {
	if o.Events <= 0 {
		o.Events = 20000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Deadline <= 0 {
		o.Deadline = time.Second
	}
	if o.Log == nil {
		nop := zerolog.Nop()
		o.Log = &nop
	}
}

// Result is the outcome of one check.
type Result struct {
	Name   string // "flow_control/decisions"
	Err    error  // nil: passed
	Detail string // what was checked, or how it failed
	Skip   bool   // not applicable (an info the policy refuses)
}

// Report is the outcome of a run.
type Report struct {
	Plugin  *plugins.Info
	Results []Result
}

// Passed reports whether no check failed.
func (r *Report) Passed() bool {
	for _, res := range r.Results {
		if res.Err != nil {
			return false
		}
	}
	return true
}

// Write prints one line per check.
func (r *Report) Write(w io.Writer) {
	if r.Plugin != nil {
		fmt.Fprintf(w, "plugin %s %s (protocol %d) at %s\n", r.Plugin.Name, r.Plugin.Version, r.Plugin.Protocol, r.Plugin.Path)
	}
	for _, res := range r.Results {
		status := "PASS"
		detail := res.Detail
		switch {
		case res.Err != nil:
			status, detail = "FAIL", res.Err.Error()
		case res.Skip:
			status = "SKIP"
		}
		fmt.Fprintf(w, "%-4s  %-28s %s\n", status, res.Name, detail)
	}
	if r.Passed() {
		fmt.Fprintln(w, "ok")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

// Verify runs the suite against the plugin at path. The error is for a
// plugin that cannot be started at all; everything else is in the report.
func Verify(ctx context.Context, path string, o Options) (*Report, error) {
	o.defaults()
	info, err := plugins.Probe(ctx, path, *o.Log)
	if err != nil {
		return nil, err
	}
	r := &Report{Plugin: info}
	add := func(res Result) { r.Results = append(r.Results, res) }
	add(Result{Name: "handshake", Detail: fmt.Sprintf("serves %s", kindList(info.Kinds))})
	if info.Name == "" || len(info.Kinds) == 0 {
		r.Results[0].Err = fmt.Errorf("the plugin names no %s", map[bool]string{true: "policy kind", false: "name"}[info.Name != ""])
		return r, nil
	}
	for _, kind := range info.Kinds {
		h := &harness{ctx: ctx, path: path, kind: kind, o: o, rng: rand.New(rand.NewPCG(o.Seed, uint64(len(kind))))}
		schema, err := plugins.Schema(kind, "", path)
		if err != nil {
			add(Result{Name: string(kind) + "/schema", Err: err})
			continue
		}
		h.params, err = paramsFor(schema, o.Params)
		if err != nil {
			add(Result{Name: string(kind) + "/schema", Err: fmt.Errorf("options: %w", err)})
			continue
		}
		add(Result{Name: string(kind) + "/schema", Detail: fmt.Sprintf("%d parameters", len(schema))})
		var model kindModel
		switch kind {
		case core.KindFlowControl:
			model = flowModel{}
		case core.KindRecvBuf:
			model = recvModel{}
		case core.KindSched:
			model = schedModel{}
		default:
			add(Result{Name: string(kind), Err: fmt.Errorf("unknown policy kind %q", kind)})
			continue
		}
		for _, res := range model.run(h) {
			res.Name = string(kind) + "/" + res.Name
			add(res)
		}
	}
	return r, nil
}

func kindList(ks []core.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

func paramsFor(schema []core.Param, kv map[string]string) (core.Params, error) {
	p, err := core.NewParams(schema)
	if err != nil {
		return p, err
	}
	for k, v := range kv {
		if err := p.SetText(k, v); err != nil {
			return p, err
		}
	}
	return p, nil
}

// kindModel runs the checks of one policy kind.
type kindModel interface {
	run(h *harness) []Result
}

// harness opens the plugin for one kind and watches for its failure.
type harness struct {
	ctx    context.Context
	path   string
	kind   core.Kind
	params core.Params
	o      Options
	rng    *rand.Rand
}

// open starts a fresh plugin process for the kind. With abort, a failure
// is reported (not covered up by a fallback).
func (h *harness) open(abort bool) (*plugins.Policy, error) {
	onFailure := "fallback"
	if abort {
		onFailure = "abort"
	}
	return plugins.Open(h.ctx, plugins.Block{
		Kind: h.kind, Path: h.path, Params: h.params, OnFailure: onFailure, Pos: "conformance",
	}, plugins.Options{Log: *h.o.Log, Deadline: h.o.Deadline, Abort: func(error) {}})
}

// failure is the plugin's failure, if it failed.
func failure(p *plugins.Policy) error {
	select {
	case <-p.Failed():
		return p.Err()
	default:
		return nil
	}
}

// violations collects broken invariants, keeping the first few verbatim.
type violations struct {
	n     int
	first []string
}

func (v *violations) add(format string, args ...any) {
	v.n++
	if len(v.first) < 5 {
		v.first = append(v.first, fmt.Sprintf(format, args...))
	}
}

func (v *violations) err(what string) error {
	if v.n == 0 {
		return nil
	}
	more := ""
	if v.n > len(v.first) {
		more = fmt.Sprintf("; and %d more", v.n-len(v.first))
	}
	return fmt.Errorf("%d %s: %s%s", v.n, what, strings.Join(v.first, "; "), more)
}

// streamer is one kind's side of a random stream: the model produces
// events and checks and applies decisions.
type streamer[E, D any] interface {
	events(rng *rand.Rand, n int) []E
	apply(ds []D, v *violations)
}

// stream drives pol with o.Events random events in calls of random size,
// polling as a mechanism does, then waits for every answer.
func stream[E, D any](h *harness, p *plugins.Policy, pol interface {
	Observe([]E, []D) []D
}, m streamer[E, D], events int) (int, error) {
	var v violations
	var out []D
	decisions := 0
	for sent := 0; sent < events; {
		n := min(1+h.rng.IntN(128), events-sent)
		out = pol.Observe(m.events(h.rng, n), out[:0])
		decisions += len(out)
		m.apply(out, &v)
		sent += n
		if h.rng.IntN(4) == 0 {
			out = pol.Observe(nil, out[:0])
			decisions += len(out)
			m.apply(out, &v)
		}
		if err := failure(p); err != nil {
			return decisions, err
		}
	}
	ctx, cancel := context.WithTimeout(h.ctx, 10*h.o.Deadline+10*time.Second)
	defer cancel()
	if err := p.Sync(ctx); err != nil {
		return decisions, err
	}
	out = pol.Observe(nil, out[:0])
	decisions += len(out)
	m.apply(out, &v)
	return decisions, v.err("invariant violations")
}

// crashAndRestart kills the plugin mid-stream and checks the host's
// fallback, then starts a fresh one. feed drives a stream of n events into
// an open policy (without checking decisions: after the kill they are the
// fallback's); setup sets a fresh one up.
func crashAndRestart(h *harness, setup func(p *plugins.Policy) error, feed func(p *plugins.Policy, n int)) []Result {
	var out []Result
	crash := Result{Name: "crash"}
	func() {
		p, err := h.open(false)
		if err != nil {
			crash.Err = err
			return
		}
		defer p.Close()
		if err := setup(p); err != nil {
			crash.Err = err
			return
		}
		feed(p, 2000)
		pid := p.Pid()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			crash.Err = fmt.Errorf("kill %d: %w", pid, err)
			return
		}
		start := time.Now()
		deadline := time.After(10*h.o.Deadline + 10*time.Second)
		for failure(p) == nil {
			// Observe must go on answering while the host notices.
			feed(p, 16)
			select {
			case <-deadline:
				crash.Err = errors.New("the host did not notice the killed plugin")
				return
			case <-time.After(time.Millisecond):
			}
		}
		noticed := time.Since(start)
		feed(p, 2000) // the fallback serves
		if !strings.Contains(failure(p).Error(), "plugin failed") {
			crash.Err = fmt.Errorf("unexpected failure: %v", failure(p))
			return
		}
		crash.Detail = fmt.Sprintf("SIGKILL noticed after %v; Observe answered throughout, then from the fallback", noticed.Round(time.Microsecond))
	}()
	out = append(out, crash)

	restart := Result{Name: "restart"}
	func() {
		p, err := h.open(true)
		if err != nil {
			restart.Err = fmt.Errorf("starting again: %w", err)
			return
		}
		if err := setup(p); err != nil {
			p.Close()
			restart.Err = fmt.Errorf("after a restart: %w", err)
			return
		}
		feed(p, 2000)
		ctx, cancel := context.WithTimeout(h.ctx, 10*h.o.Deadline+10*time.Second)
		defer cancel()
		if err := p.Sync(ctx); err != nil {
			p.Close()
			restart.Err = fmt.Errorf("after a restart: %w", err)
			return
		}
		start := time.Now()
		p.Close()
		pid := p.Pid()
		if syscall.Kill(pid, 0) == nil {
			restart.Err = fmt.Errorf("process %d still runs after Close", pid)
			return
		}
		restart.Detail = fmt.Sprintf("a fresh process serves; Close took %v", time.Since(start).Round(time.Microsecond))
	}()
	return append(out, restart)
}

// policyOf is a policy kind's interface (core.FlowControl for I =
// core.FlowInfo, ...).
type policyOf[I, S, E, D any] interface {
	Setup(I) (S, error)
	Observe([]E, []D) []D
}

// kindSpec describes a kind whose policy is set up once per instance:
// the suite tries each info on a fresh plugin process.
type kindSpec[I, S, E, D any] struct {
	infos    []I
	label    func(I) string
	policy   func(*plugins.Policy) policyOf[I, S, E, D]
	check    func(I, S) error
	describe func(S) string
	state    func(I, S) streamer[E, D]
}

// runPerInfo sets a fresh plugin up for each info and streams random
// events at those it accepts; at least one must be accepted. Then it
// crashes and restarts the plugin set up with the first accepted info.
func runPerInfo[I, S, E, D any](h *harness, k kindSpec[I, S, E, D]) []Result {
	var res []Result
	var accepted *I
	for i := range k.infos {
		info := k.infos[i]
		r := perInfo(h, k, info)
		res = append(res, r...)
		if accepted == nil && !r[0].Skip && r[0].Err == nil {
			accepted = &info
		}
	}
	if accepted == nil {
		return append(res, Result{Name: "setup", Err: fmt.Errorf("the policy accepted none of the %d setups tried", len(k.infos))})
	}
	var st streamer[E, D]
	setup := func(p *plugins.Policy) error {
		s, err := k.policy(p).Setup(*accepted)
		st = k.state(*accepted, s)
		return err
	}
	feed := func(p *plugins.Policy, n int) { k.policy(p).Observe(st.events(h.rng, n), nil) }
	return append(res, crashAndRestart(h, setup, feed)...)
}

func perInfo[I, S, E, D any](h *harness, k kindSpec[I, S, E, D], info I) []Result {
	name := "setup/" + k.label(info)
	p, err := h.open(true)
	if err != nil {
		return []Result{{Name: name, Err: err}}
	}
	defer p.Close()
	pol := k.policy(p)
	s, err := pol.Setup(info)
	if err != nil {
		if f := failure(p); f != nil {
			return []Result{{Name: name, Err: f}}
		}
		return []Result{{Name: name, Skip: true, Detail: "refused: " + err.Error()}}
	}
	if err := k.check(info, s); err != nil {
		return []Result{{Name: name, Err: err}}
	}
	out := []Result{{Name: name, Detail: k.describe(s)}}
	n, err := stream(h, p, pol, k.state(info, s), h.o.Events)
	return append(out, Result{Name: "stream/" + k.label(info), Err: err,
		Detail: fmt.Sprintf("%d events, %d decisions within the invariants; every batch answered within %v", h.o.Events, n, h.o.Deadline)})
}
