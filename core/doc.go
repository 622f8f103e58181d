// Package core holds the contracts every other gobtl package is written
// against: the BTL module and endpoint interfaces, the frame header that
// every transport carries, memory keys for one-sided operations, the
// bootstrap (rank, size and a key-value exchange with a fence), an
// injectable clock, the control-plane policy interfaces, the component
// registry, typed errors and metrics.
//
// The shape follows Open MPI's PML/BTL split. A BTL ("byte transfer
// layer") module moves frames and bytes over one kind of hardware; it knows
// nothing of matching or protocols. The PML above it turns sends and
// receives into frames. What a BTL can do is described by its Attrs —
// limits and a performance model (bandwidth, latency, the rendezvous
// mechanism table) — and by the capability sets it implements, discovered
// by type assertion, so that the PML decides from capabilities and never
// from a transport's name (UCX's uct_iface_attr, Open MPI's btl_flags).
//
// # Capability sets
//
// A set is one interface (RDMA is one per side: the endpoint's operations
// and the module's registration), there or not, as libfabric's op tables
// (fi_msg, fi_rma, fi_tagged) are; there are no capability flags beside
// them to keep in step — CapsOf derives the flags for display.
//
//	set          interface                    on        implemented by
//	messaging    Module, Endpoint (required)  both      every BTL: sm, ib, extoll, inproc, self, template
//	RDMA         RDMA + Registrar             ep + mod  ib, extoll, sm (CMA), inproc (rdma = true), self
//	eager        Eager                        endpoint  sm (fast boxes)
//	resources    Resources                    endpoint  ib (credits, completions), sm (fragments)
//	notify       Notifier                     module    ib, sm, inproc
//	attach       Attacher                     module    sm, extoll
//
// Why these sets. Messaging includes Disconnect: every transport can
// drop one peer and let it learn of that through its own OnPeerLost (sm
// flags its box for the peer, ib and extoll send a message that says so,
// inproc and the template close the link); the PML calls it when it fails
// a virtual channel for a reason of its own, and without it the peer's
// requests would wait forever. RDMA takes registration into the set: a
// transport that needs none registers all the same (sm, self), so that
// the PML has one path and a key to send. The eager set is the fast path
// any transport with per-peer receive space in order may offer; its calls
// carry fields of the frame header, never the PML's decisions: TakeEager
// takes the next frame through a tag filter in fi_trecv's shape (a tag and
// an ignore mask, what FI_TAGGED and UCX's tag offload compare), so that a
// blocking receive crosses into the transport once; which receive the
// frame goes to and what a wildcard means stay the PML's. Resources gathers what the PML reads of a transport's
// back-pressure — credits (PreferRendezvous), fragments in flight, when a
// refused send may pass — in one set implemented whole, with answers from
// the transport's own mechanism.
//
// Where a set's support depends on the configuration or the device (inproc
// with rdma = false, sm without CMA, a libfabric provider without FI_RMA),
// the module hands out endpoints of a type without the set's methods
// (rdma.go).
//
// The choice of rendezvous mechanism — a single copy by RDMA or the
// send-based pipeline, its fragments and depth — is part of the
// performance model (Attrs.Mech, MechTable), not a set: the module
// proposes by size and queue depth, and where a rule lets the choice
// depend on measurement (MechRule.Choose) the PML measures and chooses,
// for any transport.
//
// Tag-matching offload (UCX's tag offload, libfabric's FI_TAGGED, which
// btl/ofi's providers may have) would be a future set on the endpoint:
// post a receive with a tag and ignore mask, have the device match
// arriving eager frames against it and place them, and hand unexpected
// ones to the PML, which keeps MPI's order across offloaded and
// software-matched receives. No interface is declared until a transport
// implements it.
//
// Policies — flow control, receive-buffer layout, multirail scheduling — are
// control, not data path: the mechanism in a BTL or the PML emits events, a
// policy answers with decisions, and the mechanism checks each decision
// before it applies it ("policy proposes, mechanism disposes").
//
// core imports nothing of gobtl's own.
package core
