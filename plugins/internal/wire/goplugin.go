package wire

import (
	"context"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// GRPCPlugin adapts one gRPC service to go-plugin's plugin set: Register
// is what the plugin side serves, NewClient what the host side dispenses.
// Either may be nil on the side that does not use it.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Register  func(*grpc.Server)
	NewClient func(*grpc.ClientConn) any
}

// GRPCServer registers the service.
func (g *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if g.Register != nil {
		g.Register(s)
	}
	return nil
}

// GRPCClient returns the service's client.
func (g *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return g.NewClient(cc), nil
}

// Handshake is go-plugin's handshake for gobtl policy plugins. The
// protocol version is negotiated through VersionedPlugins; ProtocolVersion
// here only serves hosts that do not negotiate.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   MagicCookieKey,
	MagicCookieValue: MagicCookieValue,
}

// MaxMessage bounds one protocol message (a batch of events or
// decisions). The host never lets a batch grow past a size that fits.
const MaxMessage = 32 << 20

// SocketDirPrefix begins the name of the directory the host makes in
// $TMPDIR for each plugin process it starts, and names to the plugin in
// go-plugin's PLUGIN_UNIX_SOCKET_DIR: the plugin puts its socket there.
// The host removes it when it stops the plugin; a plugin whose host died
// without doing so removes it itself, if its name has this prefix.
const SocketDirPrefix = "gobtl-plugin-"

// EnvLogLevel carries the host's log level to the plugin, so that a plugin
// does not format debug lines the host would drop.
const EnvLogLevel = "GOBTL_PLUGIN_LOG_LEVEL"

// EnvQuiet tells a plugin that its host takes core.FlowQuiet statements
// (it keeps the monitoring points they name from the plugin). A host
// without it would pass them to its engine as decisions, which reject
// them, and would count every answer as holding one; so the SDK drops
// them unless this is set.
const EnvQuiet = "GOBTL_PLUGIN_QUIET"

// EnvHostFD names, in a plugin's environment, a descriptor it inherited:
// the read end of a pipe whose write end only its host holds. A read of
// it returns end of file once the host is gone, however it went (SIGKILL
// included), so a plugin waits for that in one blocking read, where
// without it (an older host) it has to poll its parent's pid — a wake-up
// of an otherwise idle process, several times a second, on cores the
// ranks are busy on.
const EnvHostFD = "GOBTL_PLUGIN_HOST_FD"
