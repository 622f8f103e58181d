package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/owner"
	"github.com/gobtl/gobtl/plugins/internal/wire"
	pb "github.com/gobtl/gobtl/plugins/policypb"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Info describes a plugin as it describes itself.
type Info struct {
	Name    string
	Version string
	Doc     string
	Kinds   []core.Kind
	Path    string
	// Protocol is the plugin protocol version negotiated in the handshake.
	Protocol int
}

// Serves reports whether the plugin serves policies of kind.
func (i *Info) Serves(kind core.Kind) bool {
	for _, k := range i.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// proc is one running plugin process and its gRPC connection.
type proc struct {
	path    string
	client  *plugin.Client
	rpc     plugin.ClientProtocol
	ctl     pb.PluginClient
	info    Info
	sockDir string
	stderr  *tailBuffer
	// hostEnd is the write end of the plugin's wire.EnvHostFD pipe: the
	// plugin exits when it closes, with this process or in kill.
	hostEnd *os.File

	mu  sync.Mutex
	cmd *exec.Cmd // go-plugin starts it; its Process is the plugin

	killOnce sync.Once
}

// startOptions tune a launch.
type startOptions struct {
	sha256       string // hex; empty: not pinned
	startTimeout time.Duration
	log          zerolog.Logger
}

// hostPluginSets lists the plugin sets this host speaks, by protocol version. A
// future protocol 2 is added here, beside 1, for as long as plugins built
// against the older SDK are to keep working.
func hostPluginSets() map[int]plugin.PluginSet {
	set := plugin.PluginSet{
		wire.ServicePlugin:           &wire.GRPCPlugin{NewClient: func(cc *grpc.ClientConn) any { return pb.NewPluginClient(cc) }},
		string(core.KindFlowControl): &wire.GRPCPlugin{NewClient: func(cc *grpc.ClientConn) any { return pb.NewFlowControlClient(cc) }},
		string(core.KindRecvBuf):     &wire.GRPCPlugin{NewClient: func(cc *grpc.ClientConn) any { return pb.NewRecvBuffersClient(cc) }},
		string(core.KindSched):       &wire.GRPCPlugin{NewClient: func(cc *grpc.ClientConn) any { return pb.NewSchedulerClient(cc) }},
	}
	return map[int]plugin.PluginSet{wire.ProtocolVersion: set}
}

// start launches the plugin at path, completes the handshake and asks it
// who it is. The error says, in words, what went wrong: not a plugin, the
// wrong protocol, a checksum mismatch, ...
func start(ctx context.Context, path string, o startOptions) (*proc, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	exe, err := openExecutable(abs)
	if err != nil {
		return nil, err
	}
	defer exe.close()
	if err := exe.checkPin(path, o.sha256); err != nil {
		return nil, err
	}
	if o.startTimeout <= 0 {
		o.startTimeout = 10 * time.Second
	}
	// The plugin makes its socket in sockDir (go-plugin's
	// PLUGIN_UNIX_SOCKET_DIR). The name begins with wire.SocketDirPrefix,
	// which a plugin outliving this process removes itself (sdk's
	// exitWithParent), and carries this process, so that what a host killed
	// during the handshake leaves is removed by the next launcher (package
	// launch, clean.go); kill removes it however the plugin ended.
	sockDir, err := os.MkdirTemp(owner.TempDir(), owner.PluginDirPrefix(owner.Self()))
	if err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	// The plugin waits for this process's end by reading a pipe only this
	// process writes to (wire.EnvHostFD), instead of polling for it.
	pluginEnd, hostEnd, err := os.Pipe()
	if err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, fmt.Errorf("host pipe: %w", err)
	}
	p := &proc{path: path, sockDir: sockDir, stderr: &tailBuffer{max: 4096}, hostEnd: hostEnd}
	if testHookBeforeExec != nil {
		testHookBeforeExec(abs)
	}
	// What runs is the file opened and checked above (exec.go).
	cmd, release, err := exe.command(abs, []*os.File{pluginEnd}) // descriptor 3
	if err != nil {
		pluginEnd.Close()
		hostEnd.Close()
		_ = os.RemoveAll(sockDir)
		return nil, err
	}
	p.cmd = cmd
	// The plugin leads a process group of its own, so that a plugin that
	// misses its handshake or its deadline goes with whatever it started.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Env = pluginEnv(sockDir, o.log.GetLevel())
	p.client = plugin.NewClient(p.clientConfig(o))
	rpc, err := p.client.Client()
	// Started or not, the plugin's end is the plugin's alone now: were it
	// left open here, the plugin would never read end of file.
	pluginEnd.Close()
	release()
	if err != nil {
		// At the handshake deadline the plugin is not asked to stop: it
		// has shown it does not listen.
		p.hardKill()
		p.kill()
		return nil, p.explainStart(err, o.startTimeout)
	}
	if !exe.unchanged() {
		p.hardKill()
		p.kill()
		return nil, fmt.Errorf("%s was written while it started (its modification time or size changed); it was stopped", path)
	}
	// Connected: nobody dials the socket again (no broker), so its name
	// goes now, and a host killed outright later leaves no directory.
	_ = os.RemoveAll(sockDir)
	p.rpc = rpc
	if err := p.hello(ctx, o.startTimeout); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// pluginEnv is a plugin's environment: the host's first, ours after it.
// os/exec keeps the last of duplicate keys, and go-plugin, left to add
// the host's itself (SkipHostEnv false), would add it after ours, so that
// a rank started with a GOMAXPROCS of its own would hand that to its
// plugins.
func pluginEnv(sockDir string, level zerolog.Level) []string {
	return append(os.Environ(),
		plugin.EnvUnixSocketDir+"="+sockDir,
		wire.EnvLogLevel+"="+levelToHclog(level).String(),
		// One P: a plugin answers one stream of batches at a time. With
		// more, every batch that wakes a goroutine also wakes a second
		// thread to spin for work, and on a node whose cores the ranks
		// keep busy, that spinning is taken from them (a profile of
		// extoll_dynamic's process: most samples in the Go scheduler's
		// findRunnable, stopm and sysmon, few in gRPC or the policy).
		"GOMAXPROCS=1",
		wire.EnvQuiet+"=1",
		wire.EnvHostFD+"=3",
	)
}

// clientConfig is go-plugin's configuration for p's command.
func (p *proc) clientConfig(o startOptions) *plugin.ClientConfig {
	name := filepath.Base(p.path)
	return &plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: hostPluginSets(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Cmd:              p.cmd,
		SkipHostEnv:      true, // in p.cmd.Env already, under ours
		// No SecureConfig: it would hash p.cmd's path, which names the
		// open file start checked already.
		StartTimeout: o.startTimeout,
		Logger:       newZlog(o.log, name),
		Stderr:       p.stderr,
		SyncStdout:   &lineLog{log: o.log.With().Str("plugin", name).Logger(), stream: "stdout"},
		SyncStderr:   &lineLog{log: o.log.With().Str("plugin", name).Logger(), stream: "stderr"},
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(wire.MaxMessage), grpc.MaxCallSendMsgSize(wire.MaxMessage))},
	}
}

// hello asks the connected plugin who it is.
func (p *proc) hello(ctx context.Context, timeout time.Duration) error {
	raw, err := p.rpc.Dispense(wire.ServicePlugin)
	if err != nil {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	p.ctl = raw.(pb.PluginClient)
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := p.ctl.Info(ictx, &pb.InfoRequest{})
	if err != nil {
		return fmt.Errorf("%s completed the handshake but does not answer Info: %w", p.path, err)
	}
	p.info = Info{Name: r.GetName(), Version: r.GetVersion(), Doc: r.GetDoc(), Path: p.path, Protocol: p.client.NegotiatedVersion()}
	for _, k := range r.GetKinds() {
		p.info.Kinds = append(p.info.Kinds, core.Kind(k))
	}
	return nil
}

var incompatible = regexp.MustCompile(`Plugin version: (\d+)`)

// explainStart turns go-plugin's start errors into what a user can act on.
func (p *proc) explainStart(err error, timeout time.Duration) error {
	msg := err.Error()
	tail := p.stderr.String()
	withTail := func(s string) error {
		if tail != "" {
			s += "; its stderr ends with: " + tail
		}
		return fmt.Errorf("%s", s)
	}
	switch {
	case strings.Contains(msg, "exited before we could connect"):
		return withTail(fmt.Sprintf("%s is not a gobtl policy plugin: it exited before the plugin handshake", p.path))
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		line := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(msg, "Unrecognized remote plugin message: "), "\n", 2)[0])
		return withTail(fmt.Sprintf("%s is not a gobtl policy plugin: it printed %q instead of the plugin handshake", p.path, line))
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return withTail(fmt.Sprintf("%s is not a gobtl policy plugin: no plugin handshake within %v", p.path, timeout))
	case strings.Contains(msg, "incompatible API version"):
		v := "?"
		if m := incompatible.FindStringSubmatch(msg); m != nil {
			v = m[1]
		}
		return fmt.Errorf("%s speaks gobtl plugin protocol %s, this gobtl speaks %d: rebuild the plugin against this gobtl's plugins/sdk", p.path, v, wire.ProtocolVersion)
	case strings.Contains(msg, "unsupported plugin protocol"):
		return fmt.Errorf("%s serves go-plugin's net/rpc protocol; gobtl policy plugins serve gRPC (build it with plugins/sdk)", p.path)
	case strings.Contains(msg, "incompatible core API version"):
		return fmt.Errorf("%s was built with an incompatible hashicorp/go-plugin: %v", p.path, err)
	}
	return withTail(fmt.Sprintf("%s: %v", p.path, err))
}

// dispense returns the gRPC client of kind's service.
func (p *proc) dispense(kind core.Kind) (any, error) {
	return p.rpc.Dispense(string(kind))
}

// pid is the plugin's process id, 0 before it started.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill stops the plugin and removes its socket directory. It asks nicely
// first (go-plugin's Shutdown), but a plugin that is stuck — the reason
// it is being killed, often — gets SIGKILL: go-plugin's graceful path
// waits on the plugin's answer and would hang on a stopped process.
func (p *proc) kill() {
	p.killOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			p.client.Kill()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			p.hardKill()
			<-done
		}
		p.hostEnd.Close()
		_ = os.RemoveAll(p.sockDir)
	})
}

// explain says how the process ended, when a broken stream or a failed
// call is because it did: "the plugin process exited (signal: killed)". A
// deadline miss is not a broken stream; it is returned as it is.
func (p *proc) explain(err error) error {
	if status.Code(errors.Unwrap(err)) == codes.OK && !strings.Contains(err.Error(), "rpc error") {
		return err
	}
	for end := time.Now().Add(500 * time.Millisecond); !p.client.Exited(); {
		if time.Now().After(end) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	state := "exited"
	p.mu.Lock()
	if ps := p.cmd.ProcessState; ps != nil {
		state = ps.String()
	}
	p.mu.Unlock()
	if tail := p.stderr.lastLine(); tail != "" {
		return fmt.Errorf("the plugin process ended (%s; its last words: %s): %w", state, tail, err)
	}
	return fmt.Errorf("the plugin process ended (%s): %w", state, err)
}

// hardKill sends SIGKILL to the plugin's process group: the plugin and
// anything it started.
func (p *proc) hardKill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		if p.client == nil || !p.client.Exited() { // a reaped pid may be reused
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
		_ = p.cmd.Process.Kill()
	}
}

func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// FileSHA256 returns the hex sha256 of a file, the form a policy block's
// sha256 attribute takes.
func FileSHA256(path string) (string, error) {
	b, err := fileSHA256(path)
	return hex.EncodeToString(b), err
}

// tailBuffer keeps the last max bytes written to it: the end of a
// plugin's stderr, quoted when it fails to start.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty line written, cut to 200 bytes.
func (t *tailBuffer) lastLine() string {
	lines := strings.Split(t.String(), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = l[:200] + "..."
	}
	return l
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
