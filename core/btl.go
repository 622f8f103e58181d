package core

import (
	"context"
	"time"
)

// Attrs are a module's limits and performance model: the only things the
// PML reads to choose protocols and rails.
type Attrs struct {
	// Component is the registered component name ("sm", "ib").
	Component string
	// Name identifies this module instance ("ib:softrc0:1").
	Name string
	// EagerLimit is the largest message, in user bytes, sent eagerly.
	EagerLimit int
	// MaxSendSize is the largest payload of one Send (header excluded).
	MaxSendSize int
	// RndvEagerLimit is how many user bytes ride inline in a rendezvous
	// start; the rest moves by RDMA or by the pipeline.
	RndvEagerLimit int
	// MaxRDMA is the largest single Put or Get in bytes; 0 means no limit.
	MaxRDMA int64
	// MaxReads bounds outstanding Gets per endpoint (an RC QP's
	// max_rd_atomic); the PML keeps a token bucket of this size. 0: no bound.
	MaxReads int
	// RDMAMin and RDMAMax bound the messages, by size in bytes, whose
	// rendezvous data this module moves better by RDMA than by the
	// send-based pipeline; RDMAMax 0 means no upper bound, and the zero
	// values mean RDMA at every size. Shared memory needs them: a
	// copy-in/copy-out pipeline, with both processes copying at once, can
	// beat a single copy made by one (Open MPI's vader: CMA wins at
	// 64 KiB-1 MiB, copy-in/copy-out at 4 MiB on the same host).
	RDMAMin, RDMAMax int64
	// Mech, when set, replaces the RDMAMin/RDMAMax window: by size and by
	// the rendezvous sends already in flight to the peer it says whether
	// the data moves by RDMA or by the pipeline, and the pipeline's
	// fragment size and depth. The module proposes; the PML follows it.
	Mech MechTable
	// MechExchange, when set, is Mech for the messages of an exchange:
	// a step in which the receiver sends to this rank at the same time
	// (pml.Comm.IsendExchange, a collective's recursive halving or
	// doubling), so that both processes wait for each other and run
	// together whatever the transport does. nil: Mech.
	MechExchange MechTable
	// Bandwidth is the expected bandwidth in bytes per second.
	Bandwidth float64
	// Latency is the expected one-way latency of a small message.
	Latency time.Duration
	// Exclusivity ranks modules that reach the same peer: when one module's
	// exclusivity is higher than another's, only the higher is used (shared
	// memory over the network for local peers), unless configured otherwise.
	Exclusivity int
}

// SendFlags modify one Send.
type SendFlags uint8

const (
	// SendSolicited asks the receiving module to raise a solicited event
	// (IB's solicited bit), waking a Notifier armed on the receiver.
	SendSolicited SendFlags = 1 << iota
	// SendNoFlowControl lets a frame bypass user-level flow control: it
	// consumes no credit and never waits in the backlog (seed 000 §4.2's
	// optimistic scheme for explicit credit messages).
	SendNoFlowControl
	// SendBacklog says the frame waited in the sender's backlog (the PML's
	// queue of frames a module refused) and is sent from it now. A module
	// that refused the queue's head for lack of a credit marks it and every
	// frame that waited behind it with FlagBacklog: each message that went
	// through the backlog, as seed 000 §4.3's receiver counts them.
	SendBacklog
)

// Endpoint is a module's handle on one peer. Connections are set up on
// first use.
type Endpoint interface {
	// Rank is the peer's rank.
	Rank() int
	// Send transmits one frame: header h followed by pre and then data (a
	// gather of two segments; either may be empty). The module sets
	// h.Length, h.Credits and FlagBacklog. Send copies what it needs before
	// it returns, so the caller may reuse both slices at once. It returns
	// an error wrapping ErrNoResources when it cannot take the frame now
	// (retry after Progress) and one wrapping ErrPeerLost when the peer is
	// gone.
	Send(h Header, pre, data []byte, flags SendFlags) error
}

// Module is one instance of a transport: a port, a shared-memory segment,
// a mailbox. The PML drives it by calling Progress; handlers run inside
// Progress on the caller's goroutine.
//
// Concurrency. The caller serializes every call into a module and into its
// endpoints (Send, Progress, Register, Endpoint, Put, Get, RegisterMem,
// SendEager, TakeEager, Arm, Disconnect, Close...): at most one runs at a
// time, so a module needs no lock on its own state for them. They may
// come from different goroutines over time (an application thread, then
// the PML's event-driven progress thread), so a module must not depend on
// which goroutine calls it.
// Handlers, RDMADone and the OnPeerLost function run inside Progress and
// may call back into the module (a handler may Send). What a module shares
// with anything else — a peer rank's module in the same process, a device
// goroutine serving one-sided operations, a peer process through shared
// memory — it synchronizes itself (atomics, locks, the ring protocol), and
// nothing it does on the hot path blocks. The channel of a Notifier is the
// one thing read from another goroutine without the caller's
// serialization.
type Module interface {
	// Attrs describes the module.
	Attrs() Attrs
	// Endpoint returns the endpoint for rank, or an error wrapping
	// ErrUnreachable when this module cannot reach it.
	Endpoint(rank int) (Endpoint, error)
	// Register installs the handler for frames of type t.
	Register(t FrameType, h Handler) error
	// OnPeerLost installs the function called (from Progress) when the
	// connection to a peer fails; every later Send to it fails too.
	OnPeerLost(f func(rank int, err error))
	// Progress delivers arrived frames and completions and returns how many
	// it handled. It never blocks.
	Progress() int
	// Disconnect drops the connection to rank for a reason of the
	// caller's (the PML fails a virtual channel for a bad payload or a
	// lost sibling subchannel): later Sends, Puts and Gets to it fail with
	// ErrPeerLost, and the peer learns of it through its own module's
	// OnPeerLost within a bounded time, instead of waiting for this rank
	// forever. It may report rank lost to this module's OnPeerLost too,
	// and does nothing for a rank already lost, unknown or never
	// connected (a peer that never heard of this rank waits for nothing
	// from it).
	Disconnect(rank int, reason error)
	// Close releases the module's resources.
	Close() error
}

// Notifier is implemented by modules that can wake a sleeping progress
// thread on solicited events: a solicited frame arriving, or a solicited
// RDMA completing. It has the shape of ibv_req_notify_cq(solicited_only)
// and ibv_get_cq_event: each Arm yields at most one notification, which
// suppresses further interrupts until the next Arm (seed 004 §4.3).
type Notifier interface {
	// Arm requests one notification at the next solicited event. If such
	// an event is already pending the notification is sent at once.
	Arm()
	// Notify is the channel notifications arrive on.
	Notify() <-chan struct{}
}

// Attacher is implemented by modules whose peers reach this rank through
// a file they open by name: a shared-memory segment, a mailbox. After the
// address exchange every rank calls Attach, which maps the files of every
// peer the module may reach; after the next fence, when every rank has
// attached, Unlink removes this rank's names. The files then live only as
// long as their mappings, and a job that dies however it dies — its
// launcher killed with SIGKILL, every rank with it — leaves nothing in
// /dev/shm (Open MPI's vader unlinks its segment after the same fence). A
// module that implements it does so on every rank that opens it, so that
// every rank takes the fence.
type Attacher interface {
	// Attach maps the peers' files. A peer it cannot map is not an error
	// here: connecting to it fails later, saying why.
	Attach(ctx context.Context) error
	// Unlink removes this rank's names; the mappings stay.
	Unlink() error
}
