package core

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
)

// Caps are a module's capability flags (Open MPI's btl_flags).
type Caps uint32

const (
	// CapSend: the module sends active messages (every module must).
	CapSend Caps = 1 << iota
	// CapPut: endpoints implement RDMA.Put (RDMA write).
	CapPut
	// CapGet: endpoints implement RDMA.Get (RDMA read).
	CapGet
	// CapNotify: the module implements Notifier (solicited events).
	CapNotify
	// CapLocalOnly: the module reaches only ranks on this host.
	CapLocalOnly
)

// Has reports whether all bits of want are set.
func (c Caps) Has(want Caps) bool { return c&want == want }

func (c Caps) String() string {
	names := []string{"send", "put", "get", "notify", "local-only"}
	s := ""
	for i, n := range names {
		if c&(1<<i) != 0 {
			if s != "" {
				s += ","
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

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
	// Caps are the capability flags.
	Caps Caps
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
// Arm, Close...): at most one runs at a time, so a module needs no lock on
// its own state for them. They may come from different goroutines over
// time (an application thread, then the PML's event-driven progress
// thread), so a module must not depend on which goroutine calls it.
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
	// Close releases the module's resources.
	Close() error
}

// MemKeySize is the wire size of a MemKey.
const MemKeySize = 32

// MemKey names registered memory so that a peer can reach it with a Put or
// a Get. Its meaning belongs to the transport that issued it (an rkey and a
// virtual address, a process id for CMA, a slot in a table).
type MemKey struct {
	Addr uint64 // base address or offset as the transport defines it
	Len  uint64 // bytes registered
	Key  uint64 // the remote key
	Aux  uint64 // transport-specific (process id, segment id, ...)
}

// Encode writes k into b, which must hold MemKeySize bytes.
func (k MemKey) Encode(b []byte) {
	_ = b[MemKeySize-1]
	binary.LittleEndian.PutUint64(b[0:], k.Addr)
	binary.LittleEndian.PutUint64(b[8:], k.Len)
	binary.LittleEndian.PutUint64(b[16:], k.Key)
	binary.LittleEndian.PutUint64(b[24:], k.Aux)
}

// DecodeMemKey reads a MemKey from b.
func DecodeMemKey(b []byte) (MemKey, error) {
	if len(b) < MemKeySize {
		return MemKey{}, fmt.Errorf("memory key: %d bytes, want %d: %w", len(b), MemKeySize, ErrBadFrame)
	}
	return MemKey{
		Addr: binary.LittleEndian.Uint64(b[0:]),
		Len:  binary.LittleEndian.Uint64(b[8:]),
		Key:  binary.LittleEndian.Uint64(b[16:]),
		Aux:  binary.LittleEndian.Uint64(b[24:]),
	}, nil
}

// Access says what a registration allows.
type Access uint8

const (
	// AccessLocalWrite lets the local device write the memory (Get target).
	AccessLocalWrite Access = 1 << iota
	// AccessRemoteRead lets peers Get from the memory.
	AccessRemoteRead
	// AccessRemoteWrite lets peers Put into the memory.
	AccessRemoteWrite
)

// Region is registered memory.
type Region interface {
	// Key is what a peer needs to reach the memory.
	Key() MemKey
	// Bytes is the registered memory.
	Bytes() []byte
}

// Registrar is implemented by modules whose RDMA needs registered memory.
// The memory must stay reachable and unmoved until Deregister; Go's heap
// does not move objects, and the module keeps a reference.
type Registrar interface {
	// RegisterMem registers buf for the given access.
	RegisterMem(buf []byte, access Access) (Region, error)
	// DeregisterMem releases a registration.
	DeregisterMem(r Region) error
}

// Completer is told when a Put or Get finishes.
type Completer interface {
	// RDMADone runs inside Progress (or an armed event drain) on the
	// initiator. err is nil on success.
	RDMADone(op *RDMAOp, err error)
}

// RDMAOp describes one Put or Get. The initiator owns it until RDMADone.
type RDMAOp struct {
	// Local is the local side: the source of a Put, the destination of a
	// Get. It lies within Region when the module needs registrations.
	Local []byte
	// Region is the local registration covering Local (nil if the module
	// does not implement Registrar).
	Region Region
	// Remote names the peer's memory; Offset is where in it to start.
	Remote MemKey
	Offset uint64
	// Solicited asks for a solicited event when this operation completes
	// locally, waking an armed Notifier (seed 004 §4.3).
	Solicited bool
	// Done is told of completion.
	Done Completer
	// Cookie is the initiator's own bookkeeping; modules never touch it.
	Cookie uint64
}

// RDMA is implemented by endpoints of modules with CapPut or CapGet.
// A returned error means the operation did not start; ErrNoResources means
// retry after Progress.
type RDMA interface {
	// Put writes op.Local into the peer's memory (RDMA write).
	Put(op *RDMAOp) error
	// Get reads the peer's memory into op.Local (RDMA read).
	Get(op *RDMAOp) error
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

// Credited is implemented by endpoints whose module runs user-level credit
// flow control, so that the PML can send a small message by rendezvous
// while the peer is out of credits (seed 000 §4.2): the START waits in the
// backlog instead of the data, and the handshake brings credits back.
type Credited interface {
	// PreferRendezvous reports that an eager frame would wait for credits
	// now and the flow-control policy asks for rendezvous in that case.
	PreferRendezvous() bool
}

// EagerReceiver is implemented by endpoints whose module can hand the
// PML the next frame from the peer in place, for the PML's fused receive
// path: a receive from one peer polls that peer's channel alone and, when
// the next frame is the plain EAGER message it takes, gets its payload
// copied straight into the user's buffer in the same call, without a
// handler call, a decoded header or a copy to an unexpected queue. It is
// the mirror of EagerSender. RecvEager is serialized with the module's
// other calls like Send and Progress.
type EagerReceiver interface {
	// RecvEager looks at the next frame the peer sent this rank. It
	// returns EagerNone when nothing has arrived, when the next frame
	// comes another way (Progress delivers it), when the peer is lost and
	// when called from a handler; EagerOther when the next frame is not a
	// plain EAGER frame (EagerMatch) on context ctx with PSN psn. For
	// such a frame it returns its tag and payload length n, and takes it
	// — copies the payload into buf and consumes the frame, as Progress
	// does once a handler returned — when its tag is tag (any tag when
	// anyTag) and buf holds it: EagerTaken; otherwise the frame stays
	// where it is: EagerKept.
	RecvEager(ctx, psn uint32, tag int32, anyTag bool, buf []byte) (htag int32, n int, res EagerResult)
}

// EagerResult is what EagerReceiver.RecvEager found.
type EagerResult uint8

// The results of RecvEager.
const (
	EagerNone  EagerResult = iota // nothing by the direct way: look again later
	EagerTaken                    // the payload is in buf and the frame consumed
	EagerKept                     // the next message, but not for this receive: it stays
	EagerOther                    // a frame RecvEager does not take: Progress delivers it
)

// EagerSender is implemented by endpoints that can take a plain EAGER
// frame as its match fields and payload and write it straight into the
// peer's receive space — sm's fast box — for the PML's fused send path,
// the mirror of EagerReceiver: a send that fits leaves without a Header built
// and passed by value (EagerWords), and without the module's general
// Send. SendEager is serialized with the module's other calls.
type EagerSender interface {
	// SendEager sends data from this rank as an EAGER frame on context
	// ctx with tag and psn, no flags — the frame Send would send with that
	// header — if it can at once by its direct way. It reports false,
	// having sent nothing, when it cannot (too long for the direct way, no
	// room there, a lost peer, a connection not yet set up); the caller
	// then sends the frame with Send, which keeps the pair's order.
	SendEager(ctx uint32, tag int32, psn uint32, data []byte) bool
}

// Disconnecter is implemented by modules that can tear down the connection
// to one peer. The PML calls it when it fails a virtual channel for its own
// reasons (a bad PML payload, a lost sibling subchannel), so that the peer
// learns of it through its own module's OnPeerLost instead of waiting.
type Disconnecter interface {
	Disconnect(rank int, reason error)
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
