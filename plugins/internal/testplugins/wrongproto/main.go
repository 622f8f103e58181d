// Command wrongproto is a plugin built against a future gobtl plugin
// protocol (version 99), for the test that a host reports the mismatch.
package main

import (
	"github.com/gobtl/gobtl/plugins/internal/wire"
	pb "github.com/gobtl/gobtl/plugins/policypb"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

func main() {
	hs := wire.Handshake
	hs.ProtocolVersion = 99
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: hs,
		VersionedPlugins: map[int]plugin.PluginSet{99: {
			wire.ServicePlugin: &wire.GRPCPlugin{Register: func(s *grpc.Server) {
				pb.RegisterPluginServer(s, pb.UnimplementedPluginServer{})
			}},
		}},
		GRPCServer: plugin.DefaultGRPCServer,
	})
}
