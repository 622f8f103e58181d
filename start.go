package gobtl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

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
	called := time.Since(processStart)
	s, err := newStart(ctx, opts)
	if err != nil {
		return nil, err
	}
	if did := s.fitGOMAXPROCS(); did != "" {
		log := s.logs.For("gobtl")
		log.Debug().Msg(did)
	}
	s.mark(core.MetricInitCalled, called)
	s.mark(core.MetricInitBootstrap, s.booted)
	for _, step := range []struct {
		run    func(context.Context) error
		metric string
	}{{s.openPolicies, ""}, {s.openBTLs, core.MetricInitBTLs}, {s.exchange, core.MetricInitExchange}, {s.startPML, core.MetricInitDone}, {s.checkRails, ""}, {s.report, ""}} {
		if err := step.run(ctx); err != nil {
			s.undo()
			return nil, err
		}
		if step.metric != "" {
			s.mark(step.metric, time.Since(processStart))
		}
	}
	tu, err := collTuning(s.cfg.Coll)
	if err != nil {
		s.undo()
		return nil, err
	}
	tu.Machine = s.machine
	s.nodeColl(tu)
	c := &Comm{p: s.comm, coll: coll.New(s.comm, tu), closers: s.closers}
	if s.ownBoot {
		c.boot = s.boot
	}
	c.aborter, _ = s.boot.(core.Aborter)
	return c, nil
}

// start is one rank's start-up in progress: what Init has opened so far,
// so that one path, undo, closes it when a later step fails.
type start struct {
	boot core.Bootstrap
	// ownBoot says Init made boot from the environment, so that the
	// communicator finalizes (or drops) it when it closes.
	ownBoot bool
	// locality is where the engine placed the ranks (nil: unknown).
	locality core.Locality
	booted   time.Duration // since processStart, when boot was up
	cfg      *conf.Config
	key      *core.JobKey // the job's secret, for the BTLs' links
	logs     *conf.Loggers
	metrics  *core.Metrics
	clock    core.Clock

	// machine is where the job's ranks run, for the collectives
	// (machine.go).
	machine coll.Machine

	flow    core.FlowControl
	recv    core.RecvBuffers
	sched   core.Scheduler
	closers []io.Closer   // the plugin policies, closed after the PML
	mods    []core.Module // the PML's once it starts
	comm    *pml.Comm
	// abort takes a failed plugin's abort (on_failure = "abort") to the
	// communicator, whenever it comes.
	abort aborter
	// watch answers the launcher's request for a state report (report.go);
	// nil when no launcher of ours started the job.
	watch *stateWatch
	// probe keeps checkRails's channels out of the PML's log (rails.go).
	probe probeHook
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
			s.boot, s.ownBoot = b, true
			s.watch = watchState(b.Rank())
		} else {
			s.boot = localJob(1)[0] // a program started alone: a job of one rank
			opts.inProcess = true
		}
	}
	s.booted = time.Since(processStart)
	s.locality = core.LocalityOf(s.boot)
	if s.metrics == nil {
		s.metrics = core.NewMetrics()
	}
	if s.clock == nil {
		s.clock = core.SystemClock
	}
	fail := func(err error) (*start, error) {
		if s.ownBoot {
			closeBoot(s.boot)
		}
		if s.watch != nil {
			s.watch.Close()
		}
		return nil, err
	}
	var err error
	if s.cfg, err = loadConfig(opts, core.SpansNodes(s.locality)); err != nil {
		return fail(err)
	}
	if opts.quiet {
		s.logs, err = s.cfg.Job.Log.NewLoggers(io.Discard, "")
	} else {
		s.logs, err = s.cfg.Job.Log.Loggers()
	}
	if err != nil {
		return fail(fmt.Errorf("gobtl: logging: %w", err))
	}
	s.logs = s.logs.WithJob(s.boot.JobID(), s.boot.Rank())
	return s, nil
}

// mark records a start-up metric (core.MetricInit*).
func (s *start) mark(name string, d time.Duration) { s.metrics.Gauge(name).Set(int64(d)) }

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
	if s.watch != nil {
		s.watch.Close()
	}
	if s.ownBoot {
		closeBoot(s.boot) // no finalize: the engine must see this rank fail
	}
}

// openPolicies builds the stack's policies, in process or as plugins.
func (s *start) openPolicies(ctx context.Context) error {
	s.abort.job, _ = s.boot.(core.Aborter)
	for _, p := range s.cfg.Policies {
		pol, err := openPolicy(ctx, s.cfg, p, s.logs, s.metrics, s.abort.abort)
		if err != nil {
			return err
		}
		s.closers = append(s.closers, pol)
		switch p.Kind {
		case core.KindFlowControl:
			s.flow = pol.FlowControl()
		case core.KindRecvBuf:
			s.recv = pol.RecvBuffers()
		case core.KindSched:
			if sc := pol.Scheduler(); sc != nil {
				s.sched = refusals{sc} // rails.go
			}
		}
	}
	return nil
}

// openBTLs opens every BTL block; each publishes its address through the
// bootstrap as it opens. The job's key, with which their links prove they
// belong to the job, is exchanged first.
func (s *start) openBTLs(ctx context.Context) error {
	var err error
	if s.key, err = core.ExchangeJobKey(ctx, s.boot); err != nil {
		return fmt.Errorf("gobtl: %w", err)
	}
	for _, b := range s.cfg.BTLs {
		ms, err := b.Component.OpenBTL(core.BTLEnv{
			Instance: b.Name, Params: b.Params, Boot: s.boot, Locality: s.locality, Clock: s.clock,
			Log: s.logs.For("btl." + b.Kind + "." + b.Name), Metrics: s.metrics, FlowControl: s.flow, RecvBuffers: s.recv,
			JobKey: s.key,
		})
		if err != nil {
			return fmt.Errorf("gobtl: %w", startError(b.DeclRange, fmt.Sprintf("Cannot open btl %q %q", b.Kind, b.Name), err))
		}
		s.mods = append(s.mods, ms...)
	}
	return nil
}

// exchange makes every rank's addresses visible before any endpoint
// connects (the PMIx modex).
func (s *start) exchange(ctx context.Context) error {
	if err := s.putOwnCore(); err != nil {
		return err
	}
	if err := s.boot.Fence(ctx); err != nil {
		return fmt.Errorf("gobtl: exchange addresses: %w", err)
	}
	if err := s.agreeMachine(ctx); err != nil {
		return err
	}
	return s.attach(ctx)
}

// attachedKey is what a rank publishes once it has mapped its peers' files.
const attachedKey = "gobtl.attached"

// attach has the modules that name files for their peers map the peers'
// files and, once every rank has (a fence), remove their own names
// (core.Attacher).
func (s *start) attach(ctx context.Context) error {
	var as []core.Attacher
	for _, m := range s.mods {
		if a, ok := m.(core.Attacher); ok {
			as = append(as, a)
		}
	}
	if len(as) == 0 {
		return nil
	}
	for _, a := range as {
		if err := a.Attach(ctx); err != nil {
			return fmt.Errorf("gobtl: attach: %w", err)
		}
	}
	// The fence alone is not enough: MPICH's hydra (4.0) answers a PMI
	// barrier before every rank has entered it, so a rank could unlink
	// its files before a slow peer on its node mapped them. Every rank
	// says it has mapped, and a rank reads that of each peer on its node
	// before it unlinks: an engine's get waits for the value where its
	// barrier does not (hydra's), and costs nothing where the fence
	// brought the values along (gobtl run, PMIx).
	if err := s.boot.Put(attachedKey, []byte{1}); err != nil {
		return fmt.Errorf("gobtl: mapping fence: %w", err)
	}
	if err := s.boot.Fence(ctx); err != nil {
		return fmt.Errorf("gobtl: mapping fence: %w", err)
	}
	loc := core.LocalityOf(s.boot)
	for r := range s.boot.Size() {
		if r == s.boot.Rank() || loc != nil && loc.Node(r) != loc.Node(s.boot.Rank()) {
			continue
		}
		if _, err := s.boot.Get(ctx, r, attachedKey); err != nil {
			return fmt.Errorf("gobtl: mapping fence: rank %d: %w", r, err)
		}
	}
	for _, a := range as {
		if err := a.Unlink(); err != nil {
			return fmt.Errorf("gobtl: %w", err)
		}
	}
	return nil
}

// startPML starts the PML over the modules with the job block's settings.
func (s *start) startPML(ctx context.Context) error {
	po, err := pmlOptions(s.cfg.Job)
	if err != nil {
		return fmt.Errorf("gobtl: %w", err)
	}
	if s.ownBoot {
		ranks, cpus := s.nodeRanks(), nodeCPUs()
		po.Backoff = placedBackoff(po.Backoff, s.cfg.Job.Progress, ranks, cpus, nodeCores(s))
		if w := spinWarning(po.Backoff, s.cfg.Job.Progress, ranks, cpus); w != "" && s.firstOnNode() {
			log := s.logs.For("gobtl")
			log.Warn().Msg(w)
		}
	}
	po.Scheduler, po.Clock, po.Log, po.Metrics = s.sched, s.clock, s.logs.For("pml").Hook(&s.probe), s.metrics
	if s.sched != nil {
		// Per-process binding needs this rank's place among its host's.
		if po.LocalRank, po.LocalRanks, err = localRank(ctx, s.boot, s.locality); err != nil {
			return fmt.Errorf("gobtl: %w", err)
		}
	}
	if s.comm, err = pml.New(s.boot.Rank(), s.boot.Size(), s.mods, po); err != nil {
		return fmt.Errorf("gobtl: %w", err)
	}
	// The engine reports a rank that ends without finalizing the moment it
	// does; the transports would notice late, or never.
	if w, ok := s.boot.(core.PeerWatcher); ok {
		w.OnPeerLost(s.comm.PeerLost)
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

// oversubscribed returns the back-off of a rank whose node runs ranks
// processes on cpus CPUs: as given, unless there are more ranks than CPUs
// and the stack did not choose the spin. Then a waiting rank yields the
// CPU (sched_yield) at every poll that finds nothing, as Open MPI's
// mpi_yield_when_idle does, and never sleeps: any spin holds the CPU the
// rank it waits for needs, and a sleep adds its own latency to every
// wake-up. A 4-rank allreduce of 8 B on 2 CPUs took 396 µs with the
// default spin and 29 µs spinning 100 polls (quiet machine); under a load
// of 13, 185 µs spinning 100, 40 µs spinning 10 and 34 µs not spinning,
// where Open MPI took 130 µs (medians of 8 alternating runs). Nearer a
// quiet machine (the job's autogroup at nice -20), 11.5 µs not spinning,
// 11.5 spinning 10 polls, 24 spinning 50 and 69 spinning 200: on this
// kernel a yield hands the CPU over even to a rank that has run more, so
// nothing is gained by holding it. GOMAXPROCS=1 made no difference
// beyond the noise (12.6 against 13.0 µs; 11.1 against 9.8).
func oversubscribed(b pml.Backoff, p conf.Progress, ranks, cpus int) pml.Backoff {
	if ranks <= cpus || p.SpinSet {
		return b
	}
	b.Spin = oversubscribedSpin
	if !p.YieldSet {
		b.Yield = math.MaxInt32
	}
	return b
}

// placedBackoff is the back-off of a rank whose node runs ranks of the
// job's processes on cpus CPUs of cores cores: oversubscribed's, and where
// each rank has a core of its own, one that spins for as long as the core
// stays its own (pml.Backoff.OwnCore) instead of climbing to sleeps that
// wake it late.
func placedBackoff(b pml.Backoff, p conf.Progress, ranks, cpus, cores int) pml.Backoff {
	b = oversubscribed(b, p, ranks, cpus)
	b.OwnCore = ranks <= cores
	return b
}

// oversubscribedSpin is the spin of a rank that shares its CPUs: none.
const oversubscribedSpin = 0

// spinWarnPolls is the longest spin a stack may choose for ranks that
// outnumber their node's CPUs before the job warns: spinning 200 polls
// made a 4-rank allreduce of 8 B on 2 CPUs 6× slower than not spinning
// (oversubscribed's figures), and conf/examples/sm.hcl's 200000 made a
// barrier of 4 ranks on 2 CPUs take 3-4 ms against 13-26 µs.
const spinWarnPolls = 100

// spinWarning is what a job says when the stack chose a long spin (b,
// after oversubscribed) for a node with more ranks than CPUs, or "".
// The stack's choice stands — a user may mean it — but a waiting rank
// then holds a CPU the rank it waits for needs, until the scheduler's
// tick takes it away.
func spinWarning(b pml.Backoff, p conf.Progress, ranks, cpus int) string {
	if ranks <= cpus || !p.SpinSet || b.Spin <= spinWarnPolls {
		return ""
	}
	return fmt.Sprintf("%d ranks share this node's %d CPUs, and the stack's job.progress spins %d polls before a waiting rank yields: it holds a CPU the rank it waits for needs (leave spin out to yield at once, or see conf/examples/oversubscribed.hcl)", ranks, cpus, b.Spin)
}

// firstOnNode reports whether this rank is its node's lowest, which says
// what is true of the whole node once.
func (s *start) firstOnNode() bool {
	if s.locality == nil {
		return s.boot.Rank() == 0
	}
	local := core.LocalRanks(s.locality, s.boot.Size(), s.boot.Rank())
	return len(local) == 0 || local[0] == s.boot.Rank()
}

// nodeRanks is the number of the job's ranks on this rank's node (all of
// them when the engine says nothing of locality).
func (s *start) nodeRanks() int {
	return core.RanksOnNode(s.locality, s.boot.Rank(), s.boot.Size())
}

// loadConfig loads the stack and makes sure it can reach this rank's own
// messages: a stack without btl "self" gets it. A stack that names no
// transport runs the default stack's (conf.DefaultStack), fitted to the
// job (defaultBTLs); spans says the job runs on several nodes.
func loadConfig(opts Options, spans bool) (*conf.Config, error) {
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
			cfg, diags = conf.LoadSources(conf.Options{Vars: opts.Vars})
		} else {
			cfg, diags = conf.Load(conf.Options{Vars: opts.Vars}, files...)
		}
		if diags.HasErrors() {
			return nil, fmt.Errorf("gobtl: %w", conf.Err(diags))
		}
	}
	if cfg.DefaultBTLs && spans && !opts.inProcess {
		var err error
		if cfg, err = WithDefaultNet(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.DefaultBTLs {
		cfg = defaultBTLs(cfg, opts.inProcess, spans)
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

// defaultBTLs fits the default stack's transports to the job: ranks that
// are goroutines of this process get the in-process fabric instead of
// the transports between processes; a job on one node leaves out the
// network ones (a device, a listener, registered buffers and a poll in
// every Progress, for no peer), which a job that spans nodes keeps, shared
// memory's higher exclusivity keeping the network off a node's own pairs.
// What the default stack holds is written in one place,
// conf/examples/default.hcl.
func defaultBTLs(cfg *conf.Config, inProcess, spans bool) *conf.Config {
	c := *cfg // the ranks of RunLocal may share one Options.Config
	c.BTLs = nil
	for _, b := range cfg.BTLs {
		switch r := b.Component.Reach; {
		case inProcess && r != core.ReachSelf:
		case r == core.ReachNetwork && !spans:
		default:
			c.BTLs = append(c.BTLs, b)
		}
	}
	if comp, ok := core.Lookup(core.KindBTL, "inproc"); ok && inProcess {
		c.BTLs = append(c.BTLs, &conf.BTL{Kind: "inproc", Name: "default", Component: comp, Params: core.MustParams(comp.Params)})
	}
	return &c
}

// startError is what a block that the start could not build from the
// stack fails with: a configuration error at the block
// (conf.StartError), or err at "<config>" for a block no file holds.
func startError(block hcl.Range, summary string, err error) error {
	if block.Filename == "" {
		return fmt.Errorf("<config>: %s: %w", summary, err)
	}
	return conf.StartError(block, summary, err)
}

// rangeOf renders where a block starts, file:line:col, for errors.
func rangeOf(r hcl.Range) string {
	if r.Filename == "" {
		return "<config>"
	}
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// localRank returns this rank's index among the ranks on its node and how
// many there are: from the engine's locality, else from a hostname
// exchange through the bootstrap.
func localRank(ctx context.Context, boot core.Bootstrap, l core.Locality) (int, int, error) {
	if l != nil {
		local := core.LocalRanks(l, boot.Size(), boot.Rank())
		return slices.Index(local, boot.Rank()), len(local), nil
	}
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
