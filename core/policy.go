package core

import "time"

// The policy contract, shared by FlowControl, RecvBuffers and Scheduler.
//
// A policy instance serves one process: the mechanism calls it with its own
// lock held, so a policy need not be safe for concurrent use, and each rank
// builds its own instance (in-process ranks too).
//
// Setup is called on an instance before any traffic, once per thing it
// serves: a FlowControl once per transport module (resource) that runs
// it, a RecvBuffers once per InfiniBand module, a Scheduler once per peer
// (this rank included) — one instance for all of them, so per-peer state
// is keyed by the peer. It may block briefly (a plugin answers over RPC
// at start-up). The whole lifecycle, with the constructor, batching and
// the fallback, is in plugins/sdk's package documentation ("Lifecycle").
//
// Observe is the only call on the running system. The mechanism batches
// the events it saw and calls Observe from its progress path; the policy
// appends decisions to out and returns it. A built-in policy answers the
// batch it was given, synchronously. A plugin policy cannot: its Observe
// queues the batch for the plugin process and returns whatever decisions
// have arrived since the last call — decisions about earlier events. So:
//
//   - Observe never blocks and never allocates in steady state;
//   - a decision may refer to an older state: the mechanism checks every
//     decision against its current state before applying it (never a
//     credit for a buffer that is not posted, weights normalised and
//     non-negative, a victim keeps its static quota) and drops or clamps
//     what does not hold, counting it;
//   - a mechanism with no events still calls Observe(nil, out) now and then
//     (at least every PolicyPollInterval while it runs) to collect late
//     decisions.
//
// If a plugin dies or stops answering, its Observe falls back to the
// policy's safe default and says so in the log; the mechanism never waits
// on it ("policy proposes, mechanism disposes").

// Policy is that contract for a kind whose info, setup, event and
// decision types are I, S, E and D: FlowControl, RecvBuffers and
// Scheduler are its three instances.
type Policy[I, S, E, D any] interface {
	// Setup chooses the mechanism's parameters for what info describes.
	Setup(info I) (S, error)
	// Observe reacts to a batch of events, appending decisions to out.
	Observe(events []E, out []D) []D
}

// PolicyPollInterval is the longest a mechanism goes without calling
// Observe while it has a policy that might have decisions pending.
const PolicyPollInterval = time.Millisecond
