// Package gobtl is the embedding API of the gobtl message-transport
// framework: Init reads a stack file (HCL), opens the BTL components and
// policies it names, and returns a communicator of the job's ranks.
//
//	comm, err := gobtl.Init(ctx, gobtl.Options{})   // under `gobtl run`
//	defer comm.Close()
//	err = comm.Send(buf, peer, tag)
//
// The job's wire-up comes from the launcher's environment (`gobtl run`), or
// from Options.Boot; a program started alone is a job of one rank. RunLocal
// runs the ranks of a job as goroutines of one process over the in-process
// fabric, for tests and examples.
//
// Importing gobtl compiles in the components listed in components.go.
package gobtl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// Re-exported so programs need import only this package.
const (
	AnySource = pml.AnySource
	AnyTag    = pml.AnyTag
)

// Status describes a completed request.
type Status = pml.Status

// Request is a non-blocking operation.
type Request = pml.Request

// EnvConfig names the environment variable holding the stack file(s) of a
// job (comma-separated), as `gobtl run -c` sets it.
const EnvConfig = "GOBTL_CONFIG"

// Options configure Init.
type Options struct {
	// ConfigFiles are the stack files. Empty: $GOBTL_CONFIG, else the
	// default stack (self, plus shared memory or the in-process fabric).
	ConfigFiles []string
	// Config is an already loaded configuration; it wins over ConfigFiles.
	Config *conf.Config
	// Vars override the stack's variables.
	Vars map[string]string
	// Boot is the job's bootstrap. Nil: the launcher's environment, else a
	// job of one rank.
	Boot core.Bootstrap
	// Metrics receives every component's counters; nil: a new registry.
	Metrics *core.Metrics
	// Clock is the time source of mechanisms; nil: the system clock.
	Clock core.Clock

	// inProcess says the job's ranks are goroutines of this process
	// (RunLocal, or a job of one rank), whose default stack is the
	// in-process fabric.
	inProcess bool
}

// Comm is a communicator of all the job's ranks.
type Comm struct {
	*pml.Comm
	closers []io.Closer
	once    sync.Once
	err     error
}

// Close closes the communicator, its transports and its policies.
func (c *Comm) Close() error {
	c.once.Do(func() {
		errs := []error{c.Comm.Close()}
		for _, cl := range c.closers {
			errs = append(errs, cl.Close())
		}
		c.err = errors.Join(errs...)
	})
	return c.err
}

// Init starts this rank of the job.
func Init(ctx context.Context, opts Options) (*Comm, error) {
	boot := opts.Boot
	if boot == nil {
		b, ok, err := bootstrapFromEnv(ctx)
		if err != nil {
			return nil, fmt.Errorf("gobtl: bootstrap: %w", err)
		}
		if ok {
			boot = b
		} else {
			boot = localJob(1)[0] // a job of one rank
			opts.inProcess = true
		}
	}
	cfg, err := loadConfig(opts)
	if err != nil {
		return nil, err
	}
	logs, err := cfg.Job.Log.Loggers()
	if err != nil {
		return nil, fmt.Errorf("gobtl: logging: %w", err)
	}
	metrics := opts.Metrics
	if metrics == nil {
		metrics = core.NewMetrics()
	}
	clock := opts.Clock
	if clock == nil {
		clock = core.SystemClock
	}
	c := &Comm{}
	fail := func(err error) (*Comm, error) {
		for _, cl := range c.closers {
			cl.Close()
		}
		return nil, err
	}

	var flow core.FlowControl
	var recv core.RecvBuffers
	var sched core.Scheduler
	for _, p := range cfg.Policies {
		pol, closer, err := openPolicy(ctx, cfg, p, logs, metrics)
		if err != nil {
			return fail(err)
		}
		if closer != nil {
			c.closers = append(c.closers, closer)
		}
		var ok bool
		switch p.Kind {
		case core.KindFlowControl:
			flow, ok = pol.(core.FlowControl)
		case core.KindRecvBuf:
			recv, ok = pol.(core.RecvBuffers)
		case core.KindSched:
			sched, ok = pol.(core.Scheduler)
		}
		if !ok {
			return fail(fmt.Errorf("gobtl: %s: policy %q is a %T, not a %s policy", rangeOf(p.DeclRange), p.Name, pol, p.Kind))
		}
	}

	var mods []core.Module
	for _, b := range cfg.BTLs {
		env := core.BTLEnv{
			Instance: b.Name, Params: b.Params, Boot: boot, Clock: clock,
			Log: logs.For("btl." + b.Kind), Metrics: metrics, FlowControl: flow, RecvBuffers: recv,
		}
		ms, err := b.Component.OpenBTL(env)
		if err != nil {
			for _, m := range mods {
				m.Close()
			}
			return fail(fmt.Errorf("gobtl: %s: btl %q %q: %w", rangeOf(b.DeclRange), b.Kind, b.Name, err))
		}
		mods = append(mods, ms...)
	}

	// Each BTL published its address when it opened; the fence makes every
	// rank's visible before any endpoint connects (the PMIx modex).
	if err := boot.Fence(ctx); err != nil {
		for _, m := range mods {
			m.Close()
		}
		return fail(fmt.Errorf("gobtl: exchange addresses: %w", err))
	}

	j := cfg.Job
	po := pml.Options{
		AllRails:  !j.Exclusive,
		Backoff:   pml.Backoff{Spin: j.Progress.Spin, Yield: j.Progress.Yield, Sleep: j.Progress.Sleep, MaxSleep: j.Progress.MaxSleep},
		Scheduler: sched, Clock: clock, Log: logs.For("pml"), Metrics: metrics,
		StallTimeout: j.StallTimeout,
	}
	if po.Protocol, err = pml.ParseProtocol(string(j.Protocol)); err != nil {
		return fail(err)
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
	if sched != nil {
		// Per-process binding needs this rank's place among its host's.
		if po.LocalRank, po.LocalRanks, err = localRank(ctx, boot); err != nil {
			for _, m := range mods {
				m.Close()
			}
			return fail(fmt.Errorf("gobtl: %w", err))
		}
	}
	pc, err := pml.New(boot.Rank(), boot.Size(), mods, po)
	if err != nil {
		for _, m := range mods {
			m.Close()
		}
		return fail(fmt.Errorf("gobtl: %w", err))
	}
	c.Comm = pc
	return c, nil
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
		cfg.BTLs = append([]*conf.BTL{{Kind: "self", Name: "self", Component: comp, Params: core.MustParams(comp.Params)}}, cfg.BTLs...)
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

// openPolicy builds a policy from its block: in process for builtin, and
// through the plugin host for plugin.
func openPolicy(ctx context.Context, cfg *conf.Config, p *conf.Policy, logs *conf.Loggers, metrics *core.Metrics) (any, io.Closer, error) {
	if p.Plugin {
		return openPlugin(ctx, cfg, p, logs, metrics)
	}
	pol, err := p.Component.NewPolicy(p.Params)
	if err != nil {
		return nil, nil, fmt.Errorf("gobtl: %s: policy %q %q: %w", rangeOf(p.DeclRange), p.Kind, p.Name, err)
	}
	return pol, nil, nil
}

func rangeOf(r hcl.Range) string {
	if r.Filename == "" {
		return "<config>"
	}
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// RunLocal runs fn on every rank of an n-rank job whose ranks are
// goroutines of this process, connected by the in-process fabric (the
// default stack) or by the stack opts names. It returns when every rank
// has returned, with their errors joined. A rank that returns an error
// ends the job, as the launcher does when a process dies: every other
// rank's blocking calls return an error wrapping core.ErrAborted (see
// pml.Comm.Abort), and the first failure comes first in the result.
func RunLocal(ctx context.Context, n int, opts Options, fn func(c *Comm) error) error {
	if n <= 0 {
		return fmt.Errorf("gobtl: RunLocal needs at least one rank, not %d", n)
	}
	boots := localJob(n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	// A rank that fails ends the job, as the launcher stops the other
	// processes: the others' blocking calls return core.ErrAborted, and
	// those still in Init see the context end.
	var (
		mu     sync.Mutex
		comms  = make([]*Comm, n)
		failed error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed != nil {
			return
		}
		failed = err
		cancel()
		for _, c := range comms {
			if c != nil {
				c.Abort(err)
			}
		}
	}
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			o := opts
			o.Boot, o.inProcess = boots[r], true
			o.Metrics = nil
			c, err := Init(ctx, o)
			if err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				fail(errs[r])
				return
			}
			defer c.Close()
			mu.Lock()
			comms[r] = c
			if failed != nil {
				c.Abort(failed)
			}
			mu.Unlock()
			if err := fn(c); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				fail(errs[r])
			}
		}(r)
	}
	wg.Wait()
	// Ranks that stopped only because another failed add nothing but
	// noise: report the failure that ended the job first.
	if failed != nil {
		var rest []error
		for _, err := range errs {
			if err != nil && err != failed && !errors.Is(err, core.ErrAborted) && !errors.Is(err, context.Canceled) {
				rest = append(rest, err)
			}
		}
		return errors.Join(append([]error{failed}, rest...)...)
	}
	return errors.Join(errs...)
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
