// Package wire converts between gobtl's policy types (package core) and
// the plugin protocol's messages (package policypb), for both ends: the
// host in package plugins and the plugin side in plugins/sdk. Each policy
// kind has one Codec (Flow, Recv, Sched) that both ends use.
//
// Event and decision batches travel in columns; a codec's Put functions
// refill a message the caller keeps and reuses, so that encoding a batch
// allocates nothing once the columns have grown to the batch size.
package wire

// ProtocolVersion is the version of the plugin protocol in policypb. The
// host and the SDK negotiate it in go-plugin's handshake; a new,
// incompatible protocol gets a new number and both ends list every
// version they still speak. Version 2 describes a flow-control policy's
// resource instead of naming its transport (policy.proto).
const ProtocolVersion = 2

// MagicCookieKey and MagicCookieValue identify a gobtl policy plugin: a
// plugin started without them in its environment refuses to run, and an
// executable that is not a gobtl plugin never answers the handshake.
const (
	MagicCookieKey   = "GOBTL_POLICY_PLUGIN"
	MagicCookieValue = "7f3c1e0a-gobtl-policy"
)

// Service names, as registered in the go-plugin plugin set: one per
// policy kind plus "plugin" for the descriptive service every plugin serves.
const ServicePlugin = "plugin"
