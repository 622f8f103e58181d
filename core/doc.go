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
// receives into frames. What a BTL can do is described by its Attrs — limits,
// a performance model (bandwidth, latency) and capability flags — and by the
// optional interfaces it implements (RDMA, Registrar, Notifier, Credited),
// discovered by type assertion, so that the PML decides from capabilities
// and never from a transport's name (UCX's uct_iface_attr, Open MPI's
// btl_flags).
//
// Policies — flow control, receive-buffer layout, multirail scheduling — are
// control, not data path: the mechanism in a BTL or the PML emits events, a
// policy answers with decisions, and the mechanism checks each decision
// before it applies it ("policy proposes, mechanism disposes").
//
// core imports nothing of gobtl's own.
package core
