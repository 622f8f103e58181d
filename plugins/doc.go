// Package plugins runs gobtl's policies — flow control, receive-buffer
// layout, multirail scheduling — either in process (a built-in) or as a
// separately compiled plugin: an executable gobtl starts and talks to
// through hashicorp/go-plugin over gRPC on a unix socket. A stack file
// picks one per policy block:
//
//	policy "flow_control" { builtin = "ib_static" }
//	policy "flow_control" { plugin = "aimd", step = 4, on_failure = "abort" }
//
// Open returns the policy as the same core interface either way
// (core.FlowControl, core.RecvBuffers, core.Scheduler), so the mechanism in
// a BTL or the PML cannot tell them apart — except in timing, which the
// policy contract (core/policy.go) allows for. Policies are control, not
// data path (ARCHITECTURE.md, "policy proposes, mechanism disposes"): a unary
// RPC per event would cost 40–140 µs here, so a plugin policy's Observe
// only appends the events to a pending batch and hands back the decisions
// that have arrived. A sender goroutine ships batches over one
// bidirectional stream per policy (several in flight; Observe calls that
// come while the plugin is busy coalesce into one batch), a receiver
// goroutine collects the plugin's answers. Observe never blocks, never
// makes an RPC, and allocates nothing once its buffers have grown. A
// policy that has settled says which events would change nothing
// (core.FlowQuiet, with the answer to a batch); the host keeps those from
// the plugin until another event comes, so a settled policy costs no round
// trip however long the run (extoll_dynamic on two ranks: about 20 events
// and 15 round trips per rank per run instead of 3,700 and 300).
//
// Crash safety. The plugin answers every batch; a batch unanswered past
// Options.Deadline, a broken stream or an exited process (SIGKILL, a
// panic in the policy) counts as a failed plugin. The host logs it with
// the policy block's position, kills the process, and either switches the
// policy to a built-in fallback (on_failure = "fallback", the default) —
// set up with every Setup the plugin answered, and fed first the events
// the plugin never answered, so none is lost — or, with on_failure =
// "abort", calls Options.Abort so the job stops with an error naming the
// block. Either way the mechanism keeps the parameters in force and keeps
// checking every decision: no message depends on a plugin being alive.
//
// Discovery: `plugin = "name"` is searched in the block's plugin_dir, then
// $GOBTL_PLUGIN_PATH, plugins/ next to the running executable, the install
// prefix's lib/gobtl/plugins, then ./bin/plugins (where `make plugins` puts
// the built-ins; Search); `path = "..."` names the executable, and `sha256` pins its
// checksum. The handshake checks a magic cookie (an executable that is not
// a gobtl plugin is refused with what it printed) and negotiates the
// protocol version (plugins/policypb; a mismatch names both versions).
// Each plugin's unix socket lives in a directory of its own that the host
// removes, even after a SIGKILL. The plugin's stderr — hclog JSON lines
// when it uses plugins/sdk — is re-emitted through the host's zerolog
// logger with plugin=<name>.
//
// Plugin authors import plugins/sdk; plugins/conformance is the suite a
// plugin must pass (`gobtl plugins verify PATH`); examples/plugins/aimd is
// a complete third-party plugin.
package plugins
