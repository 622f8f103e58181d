package gobtl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// Init starts this rank of the job: it finds the bootstrap, loads the
// stack, opens its policies and its BTLs, exchanges the BTLs' addresses
// and starts the PML. A step that fails undoes every step before it.
func Init(ctx context.Context, opts Options) (*Comm, error) {
	s, err := newStart(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context) error{s.openPolicies, s.openBTLs, s.exchange, s.startPML} {
		if err := step(ctx); err != nil {
			s.undo()
			return nil, err
		}
	}
	tu, err := collTuning(s.cfg.Coll)
	if err != nil {
		s.undo()
		return nil, err
	}
	return &Comm{Comm: s.comm, coll: coll.New(s.comm, tu), closers: s.closers}, nil
}

// start is one rank's start-up in progress: what Init has opened so far,
// so that one path, undo, closes it when a later step fails.
type start struct {
	boot    core.Bootstrap
	cfg     *conf.Config
	logs    *conf.Loggers
	metrics *core.Metrics
	clock   core.Clock

	flow    core.FlowControl
	recv    core.RecvBuffers
	sched   core.Scheduler
	closers []io.Closer   // the plugin policies, closed after the PML
	mods    []core.Module // the PML's once it starts
	comm    *pml.Comm
	// abort takes a failed plugin's abort (on_failure = "abort") to the
	// communicator, whenever it comes.
	abort aborter
}

// newStart finds the job's bootstrap and loads its stack.
func newStart(ctx context.Context, opts Options) (*start, error) {
	s := &start{boot: opts.Boot, metrics: opts.Metrics, clock: opts.Clock}
	if s.boot == nil {
		b, ok, err := bootstrapFromEnv(ctx)
		if err != nil {
			return nil, fmt.Errorf("gobtl: bootstrap: %w", err)
		}
		if ok {
			s.boot = b
		} else {
			s.boot = localJob(1)[0] // a program started alone: a job of one rank
			opts.inProcess = true
		}
	}
	if s.metrics == nil {
		s.metrics = core.NewMetrics()
	}
	if s.clock == nil {
		s.clock = core.SystemClock
	}
	var err error
	if s.cfg, err = loadConfig(opts); err != nil {
		return nil, err
	}
	if s.logs, err = s.cfg.Job.Log.Loggers(); err != nil {
		return nil, fmt.Errorf("gobtl: logging: %w", err)
	}
	return s, nil
}

// undo closes what the steps so far opened: the PML (which owns the
// modules once it exists) or the modules, then the policies.
func (s *start) undo() {
	if s.comm != nil {
		s.comm.Abort(errors.New("gobtl: start-up failed")) // no collective finalize
		s.comm.Close()
	} else {
		for _, m := range s.mods {
			m.Close()
		}
	}
	for _, c := range s.closers {
		c.Close()
	}
}

// openPolicies builds the stack's policies, in process or as plugins.
func (s *start) openPolicies(ctx context.Context) error {
	for _, p := range s.cfg.Policies {
		pol, closer, err := s.openPolicy(ctx, p)
		if err != nil {
			return err
		}
		if closer != nil {
			s.closers = append(s.closers, closer)
		}
		var ok bool
		switch p.Kind {
		case core.KindFlowControl:
			s.flow, ok = pol.(core.FlowControl)
		case core.KindRecvBuf:
			s.recv, ok = pol.(core.RecvBuffers)
		case core.KindSched:
			s.sched, ok = pol.(core.Scheduler)
		}
		if !ok {
			return fmt.Errorf("gobtl: %s: policy %q is a %T, not a %s policy", rangeOf(p.DeclRange), p.Name, pol, p.Kind)
		}
	}
	return nil
}

// openPolicy builds a policy from its block: in process for builtin, and
// through the plugin host for plugin.
func (s *start) openPolicy(ctx context.Context, p *conf.Policy) (any, io.Closer, error) {
	if p.Plugin {
		return openPlugin(ctx, s.cfg, p, s.logs, s.metrics, s.abort.abort)
	}
	pol, err := p.Component.NewPolicy(p.Params)
	if err != nil {
		return nil, nil, fmt.Errorf("gobtl: %s: policy %q %q: %w", rangeOf(p.DeclRange), p.Kind, p.Name, err)
	}
	return pol, nil, nil
}

// openBTLs opens every BTL block; each publishes its address through the
// bootstrap as it opens.
func (s *start) openBTLs(context.Context) error {
	for _, b := range s.cfg.BTLs {
		ms, err := b.Component.OpenBTL(core.BTLEnv{
			Instance: b.Name, Params: b.Params, Boot: s.boot, Clock: s.clock,
			Log: s.logs.For("btl." + b.Kind), Metrics: s.metrics, FlowControl: s.flow, RecvBuffers: s.recv,
		})
		if err != nil {
			return fmt.Errorf("gobtl: %s: btl %q %q: %w", rangeOf(b.DeclRange), b.Kind, b.Name, err)
		}
		s.mods = append(s.mods, ms...)
	}
	return nil
}

// exchange makes every rank's addresses visible before any endpoint
// connects (the PMIx modex).
func (s *start) exchange(ctx context.Context) error {
	if err := s.boot.Fence(ctx); err != nil {
		return fmt.Errorf("gobtl: exchange addresses: %w", err)
	}
	return nil
}

// startPML starts the PML over the modules with the job block's settings.
func (s *start) startPML(ctx context.Context) error {
	po, err := pmlOptions(s.cfg.Job)
	if err != nil {
		return fmt.Errorf("gobtl: %w", err)
	}
	po.Scheduler, po.Clock, po.Log, po.Metrics = s.sched, s.clock, s.logs.For("pml"), s.metrics
	if s.sched != nil {
		// Per-process binding needs this rank's place among its host's.
		if po.LocalRank, po.LocalRanks, err = localRank(ctx, s.boot); err != nil {
			return fmt.Errorf("gobtl: %w", err)
		}
	}
	if s.comm, err = pml.New(s.boot.Rank(), s.boot.Size(), s.mods, po); err != nil {
		return fmt.Errorf("gobtl: %w", err)
	}
	// A plugin that failed while the job started ends the start-up here.
	return s.abort.attach(s.comm)
}

// pmlOptions turns the job block into PML options (Unset values leave the
// BTLs' own).
func pmlOptions(j conf.Job) (pml.Options, error) {
	po := pml.Options{
		AllRails:     !j.Exclusive,
		Backoff:      pml.Backoff{Spin: j.Progress.Spin, Yield: j.Progress.Yield, Sleep: j.Progress.Sleep, MaxSleep: j.Progress.MaxSleep},
		StallTimeout: j.StallTimeout,
	}
	var err error
	if po.Protocol, err = pml.ParseProtocol(string(j.Protocol)); err != nil {
		return po, err
	}
	if j.EagerLimit != conf.Unset {
		po.EagerLimit = int(j.EagerLimit)
	}
	switch {
	case j.RndvEagerLimit == 0:
		po.RndvEagerLimit = -1
	case j.RndvEagerLimit != conf.Unset:
		po.RndvEagerLimit = int(j.RndvEagerLimit)
	}
	if j.MaxReads != conf.Unset {
		po.MaxReads = j.MaxReads
	}
	return po, nil
}

// loadConfig loads the stack and makes sure it can reach this rank's own
// messages: a stack without btl "self" gets it.
func loadConfig(opts Options) (*conf.Config, error) {
	cfg := opts.Config
	if cfg == nil {
		files := opts.ConfigFiles
		if len(files) == 0 {
			if v := os.Getenv(EnvConfig); v != "" {
				files = strings.Split(v, ",")
			}
		}
		var diags hcl.Diagnostics
		if len(files) == 0 {
			cfg, diags = conf.LoadSources(conf.Options{Vars: opts.Vars}, conf.Source{Name: "<default stack>", Bytes: []byte(defaultStack(opts.inProcess))})
		} else {
			cfg, diags = conf.Load(conf.Options{Vars: opts.Vars}, files...)
		}
		if diags.HasErrors() {
			return nil, fmt.Errorf("gobtl: %w", conf.Err(diags))
		}
	}
	hasSelf := false
	for _, b := range cfg.BTLs {
		hasSelf = hasSelf || b.Kind == "self"
	}
	if !hasSelf {
		comp, ok := core.Lookup(core.KindBTL, "self")
		if !ok {
			return nil, errors.New("gobtl: the self BTL is not compiled in")
		}
		// A copy: the ranks of RunLocal may share one Options.Config.
		withSelf := *cfg
		withSelf.BTLs = append([]*conf.BTL{{Kind: "self", Name: "self", Component: comp, Params: core.MustParams(comp.Params)}}, cfg.BTLs...)
		cfg = &withSelf
	}
	return cfg, nil
}

// defaultStack is the stack of a job that names none: the in-process
// fabric between goroutine ranks, otherwise the best transport between
// processes that is compiled in.
func defaultStack(inProcess bool) string {
	if inProcess {
		return `btl "inproc" "default" {}`
	}
	if _, ok := core.Lookup(core.KindBTL, "sm"); ok {
		return `btl "sm" "local" {}`
	}
	return ""
}

// rangeOf renders where a block starts, file:line:col, for errors.
func rangeOf(r hcl.Range) string {
	if r.Filename == "" {
		return "<config>"
	}
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// localRank returns this rank's index among the ranks on its host and how
// many there are, from a hostname exchange through the bootstrap.
func localRank(ctx context.Context, boot core.Bootstrap) (int, int, error) {
	host, err := os.Hostname()
	if err != nil {
		return 0, 0, fmt.Errorf("hostname: %w", err)
	}
	if err := boot.Put("gobtl.host", []byte(host)); err != nil {
		return 0, 0, err
	}
	if err := boot.Fence(ctx); err != nil {
		return 0, 0, err
	}
	local, count := 0, 0
	for r := 0; r < boot.Size(); r++ {
		h, err := boot.Get(ctx, r, "gobtl.host")
		if err != nil {
			return 0, 0, err
		}
		if string(h) == host {
			if r < boot.Rank() {
				local++
			}
			count++
		}
	}
	return local, count, nil
}
