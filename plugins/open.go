package plugins

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/internal/wire"
	pb "github.com/gobtl/gobtl/plugins/policypb"
	"github.com/rs/zerolog"
)

// Block is a `policy "<kind>"` block of a stack file, as the configuration
// loader decodes it:
//
//	policy "flow_control" {
//	  plugin     = "aimd"          # or builtin = "ib_static"
//	  plugin_dir = "./my-plugins"  # optional, searched first
//	  sha256     = "9f86d0..."     # optional pin of the executable
//	  on_failure = "fallback"      # or "abort"
//	  step = 4                     # the body: the policy's own parameters
//	}
type Block struct {
	Kind      core.Kind
	Builtin   string
	Plugin    string
	Path      string // explicit executable; relative to Dir
	SHA256    string
	PluginDir string // relative to Dir
	// OnFailure is "fallback" (the default when empty) or "abort".
	OnFailure string
	// Params is the body, decoded against the policy's schema (the
	// built-in's, or the plugin's from its ConfigSchema).
	Params core.Params
	// Decode, if set, decodes a plugin's body that could not be decoded
	// when the stack file was loaded (the plugin's schema was unknown):
	// Open asks the running plugin for its schema and calls Decode with
	// it, and Params is ignored. Its error should point into the file.
	Decode func(schema []core.Param) (core.Params, error)
	// Pos is where the block starts, "file:line:col", for errors.
	Pos string
	// Dir is the stack file's directory.
	Dir string
}

func (b *Block) where() string {
	pos := b.Pos
	if pos == "" {
		pos = "<no position>"
	}
	return fmt.Sprintf("%s: policy %q", pos, b.Kind)
}

// Options tune Open.
type Options struct {
	Log     zerolog.Logger
	Metrics *core.Metrics // optional: counters plugin.<name>.*
	// Abort is called, once, when a plugin whose block says on_failure =
	// "abort" fails; the job should stop with that error. With "fallback"
	// the policy switches to a built-in and Abort is not called.
	Abort func(error)
	// Deadline is how long a batch of events may go unanswered before the
	// plugin counts as dead (default 2s).
	Deadline time.Duration
	// StartTimeout bounds the plugin's start and handshake, and each Setup
	// call (default 10s).
	StartTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Deadline <= 0 {
		o.Deadline = 2 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
}

// Policy is an open policy, built in or served by a plugin. Impl (or the
// typed accessors) is what the mechanism calls; Close stops a plugin.
type Policy struct {
	Kind core.Kind
	Name string
	// Plugin describes the plugin serving the policy; nil for a built-in.
	Plugin *Info

	impl    any
	proc    *proc // nil for a built-in
	closeFn func()
	failed  <-chan struct{}
	errFn   func() error
	once    sync.Once
}

// Impl returns the policy: a core.FlowControl, core.RecvBuffers or
// core.Scheduler according to Kind.
func (p *Policy) Impl() any { return p.impl }

// FlowControl returns the policy if it is one (Kind flow_control), else nil.
func (p *Policy) FlowControl() core.FlowControl { v, _ := p.impl.(core.FlowControl); return v }

// RecvBuffers returns the policy if it is one (Kind recvbuf), else nil.
func (p *Policy) RecvBuffers() core.RecvBuffers { v, _ := p.impl.(core.RecvBuffers); return v }

// Scheduler returns the policy if it is one (Kind sched), else nil.
func (p *Policy) Scheduler() core.Scheduler { v, _ := p.impl.(core.Scheduler); return v }

// Failed is closed when the plugin has failed (and the policy fell back or
// aborted). It is nil, never ready, for a built-in.
func (p *Policy) Failed() <-chan struct{} { return p.failed }

// Err is why the plugin failed, nil while it has not.
func (p *Policy) Err() error {
	if p.errFn == nil || p.failed == nil {
		return nil
	}
	select {
	case <-p.failed:
		return p.errFn()
	default:
		return nil
	}
}

// Sync waits until the plugin has answered every event handed to Observe
// so far, or the host kept the event from it on the plugin's word that it
// changes nothing (core.FlowQuiet); the next Observe returns the
// decisions. It is for tests and
// tools (the conformance suite), never for the data path. A built-in
// answers synchronously: Sync returns at once.
func (p *Policy) Sync(ctx context.Context) error {
	if s, ok := p.impl.(interface{ sync(context.Context) error }); ok {
		return s.sync(ctx)
	}
	return nil
}

// Pid is the plugin's process id; 0 for a built-in.
func (p *Policy) Pid() int {
	if p.proc == nil {
		return 0
	}
	return p.proc.pid()
}

// Close stops the plugin process, if any, and removes its socket.
// Observe after Close proposes nothing. Close is idempotent.
func (p *Policy) Close() error {
	p.once.Do(func() {
		if p.closeFn != nil {
			p.closeFn()
		}
		running.Lock()
		delete(running.m, p)
		running.Unlock()
	})
	return nil
}

// running are the plugin policies open in this process, for Shutdown.
var running = struct {
	sync.Mutex
	m map[*Policy]struct{}
}{m: map[*Policy]struct{}{}}

// Shutdown closes every plugin policy still open in this process: their
// processes stop and their sockets go. A job that aborts calls it before
// it exits.
func Shutdown() {
	running.Lock()
	ps := make([]*Policy, 0, len(running.m))
	for p := range running.m {
		ps = append(ps, p)
	}
	running.Unlock()
	for _, p := range ps {
		p.Close()
	}
}

// Open builds the policy a block selects: `builtin = "name"` in process,
// `plugin = "name"` (or `path = "..."`) in its own process. Every error
// names the block's file:line:col and, for a plugin, the paths searched.
func Open(ctx context.Context, b Block, o Options) (*Policy, error) {
	o.defaults()
	p, err := open(ctx, b, o, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.where(), err)
	}
	return p, nil
}

// Check runs the checks Open runs on a block, and no others, then closes
// what it opened: a built-in is built; a plugin is located, its sha256
// pin checked before it is executed, started, asked for its schema, its
// body decoded with Block.Decode and its Configure run — the plugin's own
// checks of its values. `gobtl config check` calls it, so that a stack
// that passes the check passes these steps of a job's start. Its errors
// do not carry the block's position: a *ConfigError is the policy's
// refusal of its values, a *NotFoundError a plugin not found, an error
// from Decode comes back as Decode returned it.
func Check(ctx context.Context, b Block, o Options) error {
	o.defaults()
	p, err := open(ctx, b, o, true)
	if p != nil {
		p.Close()
	}
	return err
}

// ConfigError is a policy's refusal of the values of its block: a
// built-in's constructor or a plugin's Configure returned Msg (a
// parameter's own check reads "name: why").
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "bad configuration: " + e.Msg }

// open is Open without the block's position on its errors; checkOnly
// stops a plugin once it has accepted its configuration.
func open(ctx context.Context, b Block, o Options, checkOnly bool) (*Policy, error) {
	if !isPolicyKind(b.Kind) {
		return nil, fmt.Errorf("%q is not a policy kind (want %s)", b.Kind, kindList())
	}
	switch b.OnFailure {
	case "", "fallback", "abort":
	default:
		return nil, fmt.Errorf("on_failure = %q: want \"fallback\" or \"abort\"", b.OnFailure)
	}
	plugin := b.Plugin != "" || b.Path != ""
	switch {
	case b.Builtin != "" && plugin:
		return nil, errors.New("sets both builtin and plugin; choose one")
	case b.Builtin != "":
		return openBuiltin(b)
	case plugin && checkOnly:
		pc, _, _, err := configure(ctx, b, o)
		if err != nil {
			return nil, err
		}
		pc.kill()
		return nil, nil
	case plugin:
		return openPlugin(ctx, b, o)
	}
	return nil, errors.New("names no policy: set builtin = \"name\" or plugin = \"name\"")
}

func isPolicyKind(k core.Kind) bool {
	for _, pk := range core.PolicyKinds {
		if pk == k {
			return true
		}
	}
	return false
}

func kindList() string {
	var ks []string
	for _, k := range core.PolicyKinds {
		ks = append(ks, string(k))
	}
	return strings.Join(ks, ", ")
}

func openBuiltin(b Block) (*Policy, error) {
	c, ok := core.Lookup(b.Kind, b.Builtin)
	if !ok {
		var names []string
		for _, c := range core.Components(b.Kind) {
			names = append(names, c.Name)
		}
		sort.Strings(names)
		have := "none is compiled in"
		if len(names) > 0 {
			have = "compiled in: " + strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("no built-in %s policy %q (%s)", b.Kind, b.Builtin, have)
	}
	params := b.Params
	if params.Schema() == nil && len(c.Params) > 0 {
		var err error
		if params, err = core.NewParams(c.Params); err != nil {
			return nil, err
		}
	}
	v, err := c.NewPolicy(params)
	if err != nil {
		return nil, fmt.Errorf("builtin %q: %w", b.Builtin, &ConfigError{Msg: err.Error()})
	}
	if !implements(b.Kind, v) {
		return nil, fmt.Errorf("built-in %q built a %T, not a %s policy", b.Builtin, v, b.Kind)
	}
	return &Policy{Kind: b.Kind, Name: b.Builtin, impl: v}, nil
}

func implements(k core.Kind, v any) bool {
	switch k {
	case core.KindFlowControl:
		_, ok := v.(core.FlowControl)
		return ok
	case core.KindRecvBuf:
		_, ok := v.(core.RecvBuffers)
		return ok
	case core.KindSched:
		_, ok := v.(core.Scheduler)
		return ok
	}
	return false
}

// locate finds the executable a block names.
func locate(b *Block) (string, error) {
	if b.Path != "" {
		p := resolve(b.Path, b.Dir)
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("plugin path %q: %w", b.Path, err)
		}
		return p, nil
	}
	return Find(b.Plugin, SearchDirs(b.PluginDir, b.Dir))
}

// configure starts the plugin a block names and hands it its
// configuration: the steps of a start that `config check` runs too. On
// an error the plugin is stopped.
func configure(ctx context.Context, b Block, o Options) (pc *proc, path, name string, err error) {
	path, err = locate(&b)
	if err != nil {
		return nil, "", "", err
	}
	name = b.Plugin
	if name == "" {
		name = path
	}
	pc, err = start(ctx, path, startOptions{sha256: b.SHA256, startTimeout: o.StartTimeout, log: o.Log})
	if err != nil {
		return nil, "", "", fmt.Errorf("plugin %q: %w", name, err)
	}
	fail := func(err error) (*proc, string, string, error) {
		pc.kill()
		return nil, "", "", fmt.Errorf("plugin %q (%s): %w", name, path, err)
	}
	if !pc.info.Serves(b.Kind) {
		return fail(fmt.Errorf("serves %s policies, not %s", kindNames(pc.info.Kinds), b.Kind))
	}
	params := b.Params
	if b.Decode != nil {
		schema, err := pc.schema(ctx, b.Kind)
		if err != nil {
			return fail(err)
		}
		if params, err = b.Decode(schema); err != nil {
			return fail(fmt.Errorf("bad configuration body: %w", err))
		}
	}
	values, err := wire.ValuesToPB(params)
	if err != nil {
		return fail(err)
	}
	cctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	r, err := pc.ctl.Configure(cctx, &pb.ConfigureRequest{Kind: string(b.Kind), Values: values})
	cancel()
	if err != nil {
		return fail(fmt.Errorf("Configure: %w", err))
	}
	if r.GetError() != "" {
		return fail(&ConfigError{Msg: r.GetError()})
	}
	return pc, path, name, nil
}

func openPlugin(ctx context.Context, b Block, o Options) (*Policy, error) {
	pc, path, name, err := configure(ctx, b, o)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("%s policy %q (%s)", b.Kind, name, b.Pos)
	log := o.Log.With().Str("policy", string(b.Kind)).Str("plugin", name).Logger()
	o.Log = log
	var bg sync.WaitGroup
	pp := proxyParams{
		what: what, o: o, abort: b.OnFailure == "abort",
		stats: newProxyStats(o.Metrics, pc.info.Name), setupTimeout: o.StartTimeout,
		explain: pc.explain,
		onFail: func(err error) {
			// The process may be wedged: it goes now, not at Close.
			pc.hardKill()
			bg.Add(1)
			go func() { defer bg.Done(); pc.kill() }()
			if b.OnFailure == "abort" && o.Abort != nil {
				o.Abort(err)
			}
		},
	}
	impl, closeFn, wait, err := kinds[b.Kind].open(pc, pp)
	if err != nil {
		pc.kill()
		return nil, fmt.Errorf("plugin %q (%s): %w", name, path, err)
	}
	info := pc.info
	pol := &Policy{Kind: b.Kind, Name: name, Plugin: &info, impl: impl, proc: pc}
	type failer interface {
		failedCh() <-chan struct{}
		failure() error
	}
	f := impl.(failer)
	pol.failed, pol.errFn = f.failedCh(), f.failure
	pol.closeFn = func() {
		closeFn()
		pc.kill()
		wait()
		bg.Wait()
	}
	running.Lock()
	running.m[pol] = struct{}{}
	running.Unlock()
	log.Debug().Str("path", path).Str("version", info.Version).Msg("policy plugin started")
	return pol, nil
}

func kindNames(ks []core.Kind) string {
	if len(ks) == 0 {
		return "no"
	}
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, " and ")
}

func (p *proxy[E, D]) failedCh() <-chan struct{} { return p.failed }

func (p *proxy[E, D]) failure() error {
	select {
	case <-p.failed:
		return p.err
	default:
		return nil
	}
}

// Probe starts the plugin at path, asks who it is and stops it.
func Probe(ctx context.Context, path string, log zerolog.Logger) (*Info, error) {
	pc, err := start(ctx, path, startOptions{log: log, startTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	defer pc.kill()
	info := pc.info
	return &info, nil
}

// Schema returns the schema of the body of a policy block that names a
// plugin: the plugin's own ConfigSchema. name is searched as Open
// searches it when path is empty. `gobtl plugins verify` uses it on the
// executable it is given; a stack file's plugins are checked with Check,
// which honours the block's sha256 pin.
func Schema(kind core.Kind, name, path string) ([]core.Param, error) {
	b := Block{Kind: kind, Plugin: name, Path: path}
	p, err := locate(&b)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	pc, err := start(ctx, p, startOptions{log: zerolog.Nop(), startTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer pc.kill()
	if !pc.info.Serves(kind) {
		return nil, fmt.Errorf("plugin %q (%s) serves %s policies, not %s", pc.info.Name, p, kindNames(pc.info.Kinds), kind)
	}
	schema, err := pc.schema(ctx, kind)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (%s): %w", pc.info.Name, p, err)
	}
	return schema, nil
}

// schema asks the running plugin for the schema of kind's body.
func (pc *proc) schema(ctx context.Context, kind core.Kind) ([]core.Param, error) {
	r, err := pc.ctl.ConfigSchema(ctx, &pb.SchemaRequest{Kind: string(kind)})
	if err != nil {
		return nil, fmt.Errorf("ConfigSchema: %w", err)
	}
	schema, err := wire.SchemaFromPB(r.GetParams())
	if err != nil {
		return nil, fmt.Errorf("the plugin declares a malformed schema: %w", err)
	}
	return schema, nil
}
