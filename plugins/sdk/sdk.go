// Package sdk is what a gobtl policy plugin imports. A policy plugin is an
// executable of its own that implements one or more of gobtl's policy
// interfaces — core.FlowControl, core.RecvBuffers, core.Scheduler, the
// very interfaces the built-in policies implement — and hands them to
// Serve:
//
//	func main() {
//		sdk.Serve(sdk.Plugin{
//			Name:    "aimd",
//			Version: "0.1.0",
//			Params:  []core.Param{{Name: "step", Type: core.ParamInt, Default: "2"}},
//			NewFlowControl: func(p core.Params) (core.FlowControl, error) {
//				return &aimd{step: p.Int("step")}, nil
//			},
//		})
//	}
//
// gobtl starts the executable when a stack file names it
// (policy "flow_control" { plugin = "aimd" }), speaks hashicorp/go-plugin's
// handshake with it, and talks gRPC over a unix socket (the protocol is in
// plugins/policypb/policy.proto). Serve takes care of all of it: the
// plugin author writes the policy and nothing else.
//
// What the policy sees is what a built-in sees, with one difference in
// timing (core/policy.go): events arrive in batches, and the decisions
// Observe returns reach the mechanism a little later, when the mechanism
// may have moved on. The mechanism checks every decision against its
// current state before applying it, so a policy never has to be exact —
// but it does have to be prompt: a batch left unanswered past the host's
// deadline makes the host treat the plugin as dead and fall back to a
// built-in policy.
//
// # Lifecycle
//
// Each rank of a job starts a plugin process of its own for each policy
// block that names the plugin, and the process builds that block's one
// policy. The policy then lives through these calls, never two at once
// (Setup and Observe are serialised, so it needs no locks of its own):
//
//  1. The constructor (NewFlowControl, NewRecvBuffers, NewScheduler) runs
//     once, with the block's values decoded against Params — defaults
//     filled in, ranges and each Param's Check applied. Its error refuses
//     the configuration: `gobtl config check` and `gobtl run` run the
//     constructor too (in a process they stop at once) and report the
//     error at the value it names, when it reads "name: why". So a
//     constructor is cheap and has no side effects.
//  2. Setup, before any traffic, on that one instance, once per thing it
//     serves. A FlowControl is set up once per transport module that runs
//     it, for an InfiniBand port's posted buffers
//     (core.ResourcePostedBuffers) or an EXTOLL mailbox's slot pool
//     (core.ResourceSlotPool): a stack with two ib rails sets it up
//     twice. A RecvBuffers is set up once per InfiniBand module (port). A
//     Scheduler is set up once per peer — every rank the communicator
//     reaches, this rank included — with that peer's subchannels
//     (core.SchedInfo.Peer): Setup does not build a policy per peer, so
//     keep per-peer state keyed by the peer, which events and decisions
//     carry. This is what a first scheduler most often gets wrong, and
//     the conformance suite checks it. Setup may take its time (the host
//     waits up to 10 s for each).
//  3. Observe(events, out), again and again on the running system, with a
//     batch of events — of any peer and any module the policy was set up
//     for — whose decisions it appends to out. Batches coalesce while the
//     plugin is busy, and Observe(nil, out) comes at least every
//     millisecond (core.PolicyPollInterval) while the mechanism runs. An
//     Observe must answer within the host's deadline (2 s); it should
//     not allocate once its buffers have grown.
//  4. The end: the communicator closes and the host stops the process;
//     no call tells the policy. If the plugin fails first — a batch
//     unanswered past the deadline, a panic, an exit, a broken stream —
//     the host kills it and, with on_failure = "fallback" (the default),
//     hands over to the kind's built-in fallback (ib_static or
//     extoll_static by the resource, perpeer, round_robin), set up with
//     every Setup the plugin answered and fed the events it never
//     answered; with on_failure = "abort" the job stops. A plugin is
//     never restarted within a job.
//
// A built-in policy lives the same life in process, without the batching
// delay: its Observe answers the batch it is given.
//
// Logging: the plugin's stderr is the host's log. Use Logger (hclog, JSON
// lines); the host re-emits each line through its own logger, tagged with
// the plugin's name.
package sdk

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/internal/wire"
	pb "github.com/gobtl/gobtl/plugins/policypb"
	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// The policy interfaces a plugin implements; they are core's, so a policy
// written for a plugin also runs built in, and the other way round.
type (
	// FlowControl is a flow-control policy (core.FlowControl).
	FlowControl = core.FlowControl
	// RecvBuffers is a receive-buffer policy (core.RecvBuffers).
	RecvBuffers = core.RecvBuffers
	// Scheduler is a multirail scheduling policy (core.Scheduler).
	Scheduler = core.Scheduler
)

// ProtocolVersion is the plugin protocol this SDK speaks.
const ProtocolVersion = wire.ProtocolVersion

// Plugin describes a policy plugin: who it is, the schema of its HCL body,
// and a constructor for each policy kind it serves (at least one).
type Plugin struct {
	// Name is the plugin's name, normally its executable's name and the
	// name a stack file gives in `plugin = "..."`.
	Name string
	// Version is shown by `gobtl plugins list`.
	Version string
	// Doc is a one-paragraph description.
	Doc string
	// Params is the schema of the policy block's body: gobtl checks the
	// user's HCL against it (`gobtl config check` points at the line of a
	// wrong key), and the constructors get the decoded values with
	// defaults filled in and each Param's Check applied.
	Params []core.Param

	NewFlowControl func(core.Params) (core.FlowControl, error)
	NewRecvBuffers func(core.Params) (core.RecvBuffers, error)
	NewScheduler   func(core.Params) (core.Scheduler, error)
}

// Kinds lists the policy kinds p serves.
func (p *Plugin) Kinds() []core.Kind {
	var ks []core.Kind
	if p.NewFlowControl != nil {
		ks = append(ks, core.KindFlowControl)
	}
	if p.NewRecvBuffers != nil {
		ks = append(ks, core.KindRecvBuf)
	}
	if p.NewScheduler != nil {
		ks = append(ks, core.KindSched)
	}
	return ks
}

func (p *Plugin) check() error {
	if p.Name == "" {
		return fmt.Errorf("sdk: Plugin needs a Name")
	}
	if len(p.Kinds()) == 0 {
		return fmt.Errorf("sdk: plugin %q has no policy constructor (NewFlowControl, NewRecvBuffers or NewScheduler)", p.Name)
	}
	if _, err := core.NewParams(p.Params); err != nil {
		return fmt.Errorf("sdk: plugin %q: parameter schema: %w", p.Name, err)
	}
	return nil
}

// FromComponent describes a policy registered with core (a built-in) as a
// plugin: the wrappers in gobtl's plugins/<name> directories are one call
// to ServeBuiltin, which uses it.
func FromComponent(c *core.Component) Plugin {
	p := Plugin{Name: c.Name, Version: moduleVersion(), Doc: c.Doc, Params: c.Params}
	switch c.Kind {
	case core.KindFlowControl:
		p.NewFlowControl = func(ps core.Params) (core.FlowControl, error) { return build[core.FlowControl](c, ps) }
	case core.KindRecvBuf:
		p.NewRecvBuffers = func(ps core.Params) (core.RecvBuffers, error) { return build[core.RecvBuffers](c, ps) }
	case core.KindSched:
		p.NewScheduler = func(ps core.Params) (core.Scheduler, error) { return build[core.Scheduler](c, ps) }
	}
	return p
}

func build[T any](c *core.Component, ps core.Params) (T, error) {
	var zero T
	v, err := c.NewPolicy(ps)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%s %q: NewPolicy returned %T, not a %T", c.Kind, c.Name, v, (*T)(nil))
	}
	return t, nil
}

// ServeBuiltin serves the policy registered with core as kind/name. The
// policy's package must be imported (for its init) by the caller.
func ServeBuiltin(kind core.Kind, name string) {
	c, ok := core.Lookup(kind, name)
	if !ok {
		fmt.Fprintf(os.Stderr, "sdk: no built-in %s policy %q is compiled in\n", kind, name)
		os.Exit(1)
	}
	Serve(FromComponent(c))
}

// Serve runs the plugin until the host stops it; it does not return. Run
// directly from a shell (not by gobtl) it explains that and exits 1.
func Serve(p Plugin) {
	if err := p.check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nameProcess()
	log := newLogger(p.Name)
	s := &server{p: p, log: log, policies: map[core.Kind]any{}}
	set := plugin.PluginSet{wire.ServicePlugin: &wire.GRPCPlugin{Register: func(g *grpc.Server) {
		pb.RegisterPluginServer(g, &pluginService{s: s})
	}}}
	for _, k := range p.Kinds() {
		set[string(k)] = &wire.GRPCPlugin{Register: s.registerFunc(k)}
	}
	go exitWithParent(log)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{wire.ProtocolVersion: set},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(wire.MaxMessage), grpc.MaxSendMsgSize(wire.MaxMessage))...)
		},
		Logger: log,
	})
	os.Exit(0)
}

var logger hclog.Logger = hclog.NewNullLogger()

// Logger is the plugin's logger: JSON lines on stderr, which the host
// re-emits through its own log with the plugin's name. It is usable once
// Serve has started.
func Logger() hclog.Logger { return logger }

func newLogger(name string) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv(wire.EnvLogLevel))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	logger = hclog.New(&hclog.LoggerOptions{Name: name, Output: os.Stderr, JSONFormat: true, Level: level})
	return logger
}

// exitWithParent ends the plugin when the process that started it is
// gone: go-plugin's server would otherwise outlive a host killed with
// SIGKILL, holding its socket open forever. A host that went that way
// (or by a SIGTERM it does not handle, as a rank the launcher stops) did
// not remove the directory it made for the socket, so the plugin does.
//
// A host that passes wire.EnvHostFD is waited for in one read, which
// returns at the host's end and costs nothing until then: an idle plugin
// makes no system call and wakes no thread. An older host is polled for,
// by its pid, four times a second.
func exitWithParent(log hclog.Logger) {
	if host := hostPipe(); host != nil {
		var b [1]byte
		for {
			if _, err := host.Read(b[:]); err != nil {
				break // end of file: no process holds the write end
			}
		}
	} else {
		parent := os.Getppid()
		for range time.Tick(250 * time.Millisecond) {
			if os.Getppid() != parent {
				break
			}
		}
	}
	// Clean up before the log line: its write to the dead host's pipe may
	// end the process (SIGPIPE).
	removeSocketDir(os.Getenv(plugin.EnvUnixSocketDir))
	log.Warn("host process is gone; exiting")
	os.Exit(0)
}

// hostPipe is the descriptor wire.EnvHostFD names, if it is a pipe.
func hostPipe() *os.File {
	fd, err := strconv.Atoi(os.Getenv(wire.EnvHostFD))
	if err != nil || fd < 3 {
		return nil
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return nil
	}
	return os.NewFile(uintptr(fd), "host")
}

// removeSocketDir removes dir, the socket directory the host named, if it
// is one gobtl made: its name has wire.SocketDirPrefix and it holds only
// sockets (this plugin's, and a broker's). Anything else a misconfigured
// environment points at is left alone.
func removeSocketDir(dir string) {
	if dir == "" || !strings.HasPrefix(filepath.Base(dir), wire.SocketDirPrefix) {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Type()&os.ModeSocket != 0 {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir) // fails, and keeps dir, if anything else is in it
}

func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "builtin (devel)"
	}
	return "builtin " + strings.TrimPrefix(bi.Main.Version, "v")
}

// nameProcess names the process after its executable again. The host
// starts a plugin from the file it checked (exec of /proc/self/fd/N), so
// the kernel named the process after the descriptor ("7"), which is what
// ps, top and pgrep would show; os.Args[0] is the plugin's path. Where
// /proc/self/comm cannot be written the name stays.
func nameProcess() {
	_ = os.WriteFile("/proc/self/comm", []byte(filepath.Base(os.Args[0])), 0)
}
