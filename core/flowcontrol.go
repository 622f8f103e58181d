package core

import "time"

// FlowScheme is the mechanism a flow-control policy asks a transport's
// credit engine to run.
type FlowScheme uint8

const (
	// FlowNone: no user-level flow control; the device holds a sender
	// back as its resource does (FlowResource).
	FlowNone FlowScheme = iota
	// FlowCredits: user-level credits, one per receive buffer or slot.
	FlowCredits
)

// FlowResource is the kind of receive resource a flow-control policy
// divides among the senders. Policies decide by the resource, never by
// the transport's name.
type FlowResource uint8

const (
	// ResourcePostedBuffers are receive buffers the receiver posts for
	// each sender on a queue of its own, and can add or retire at run
	// time (the per-peer queues of an InfiniBand RC connection). A frame
	// that finds none posted is refused by the device and retried after
	// a timer (RNR NAK and retry, seed 000 §4.1), so credit returns need
	// no credit of their own and the hardware scheme (FlowNone) is safe.
	ResourcePostedBuffers FlowResource = iota + 1
	// ResourceSlotPool is a fixed pool of FlowInfo.Buffers slots all
	// senders write into (an EXTOLL VELO mailbox). A full pool blocks the
	// sender (seed 003 §4), so credit returns need room of their own: the
	// credit region, FlowSetup.CreditSlots per receiver in each sender's
	// pool (seed 003 §5, Equation 2).
	ResourceSlotPool
)

var flowResourceNames = map[FlowResource]string{ResourcePostedBuffers: "posted buffers", ResourceSlotPool: "slot pool"}

func (r FlowResource) String() string {
	if s, ok := flowResourceNames[r]; ok {
		return s
	}
	return "unknown resource"
}

// FlowInfo tells a flow-control policy about the resource it divides.
type FlowInfo struct {
	Resource FlowResource
	// Ranks numbers the peers: FlowEvent.Peer and FlowDecision.Peer are
	// ranks in [0, Ranks).
	Ranks int
	// Senders are the ranks that share the resource.
	Senders int
	// BufferSize is the bytes of one receive buffer or slot.
	BufferSize int
	// Buffers are the buffers or slots all senders share (a slot pool's
	// size); 0: not bounded (posted buffers).
	Buffers int
}

// FlowSetup are the credit engine's parameters chosen by a policy. Every
// field means the same on every resource; those that apply to one kind
// of resource only say so, and must be zero on the other.
type FlowSetup struct {
	Scheme FlowScheme
	// Quota is the buffers or slots each sender is entitled to at start,
	// its credit quota; 0: an equal share of the resource (posted
	// buffers: the receive layout's count per queue; a slot pool: its
	// data region divided among the senders). The hardware scheme posts
	// Quota buffers and counts no credits.
	Quota int
	// MaxQuota is the most FlowSetQuota may raise a sender's quota to;
	// 0: quotas never grow.
	MaxQuota int
	// CreditThreshold is the credits a receiver owes a sender before it
	// returns them in a frame of their own (seed 000: 5); 0: the
	// resource's rule (posted buffers: the queue's credit window; a slot
	// pool: Equation 1 of seed 003).
	CreditThreshold int
	// RndvOnNoCredit sends small messages by rendezvous while the peer is
	// out of credits (seed 000 §4.2), for transports that offer it.
	RndvOnNoCredit bool
	// CreditSlots (slot pool only) are the slots each receiver keeps in
	// each sender's pool for its credit packets (seed 003 §5).
	CreditSlots int
	// DynamicRegion (slot pool only): a sender starts with its CreditSlots
	// static slots, the rest of its quota is lent out of the free data
	// slots as it uses its credits, and quotas move between senders
	// (seed 003 §6's dynamic region).
	DynamicRegion bool
	// RNRRetry and MinRNRTimer (posted buffers only) are how the device
	// retries a frame that found no buffer posted: the retry count (7 =
	// forever; 0 keeps the transport's) and the wait before each retry
	// (0 keeps the transport's).
	RNRRetry    int
	MinRNRTimer time.Duration
}

// FlowEventKind says what a FlowEvent reports.
type FlowEventKind uint8

const (
	// FlowBacklogged: a frame from Peer carried the backlog bit.
	FlowBacklogged FlowEventKind = iota + 1
	// FlowIdle: Peer has sent nothing for Value nanoseconds.
	FlowIdle
	// FlowActivity: Value frames arrived from Peer since the last sample.
	FlowActivity
	// FlowStall: a local send to Peer waited in the backlog; Value is the
	// backlog depth.
	FlowStall
	// FlowMonitor: Peer reached a monitoring point — it has used the credits
	// granted to it since the last one (seed 003 §6.4). Value is the
	// credits it holds now.
	FlowMonitor
	// FlowQuota: the engine set Peer's quota to Quota, applying or clamping
	// a decision; a policy that keeps a copy of the quotas resyncs from it.
	// A slot pool's engine answers every FlowSetQuota with one, in the
	// order proposed (so a plugin policy can tell which of its proposals
	// an event predates); posted buffers report the clamps only.
	FlowQuota
)

// FlowEvent is something the credit engine saw.
type FlowEvent struct {
	Kind FlowEventKind
	Peer int32
	// Quota is Peer's quota as the engine holds it now: the buffers it
	// is to have posted, or its intended share of a slot pool.
	Quota int32
	Value int64
	At    time.Duration
}

// FlowDecisionKind says what a FlowDecision asks for.
type FlowDecisionKind uint8

const (
	// FlowSetQuota asks for Peer's quota to be Value. The engine clamps it
	// to [floor, MaxQuota] — the floor is Quota for posted buffers, the
	// CreditSlots static slots in a dynamic region — grows it only out of
	// buffers or slots nobody else holds, and never takes away one that
	// is posted and owed.
	FlowSetQuota FlowDecisionKind = iota + 1
	// FlowSetThreshold sets the explicit-credit threshold to Value.
	FlowSetThreshold
	// FlowReclaim asks Peer to give back the credits it holds beyond its
	// quota (a dynamic region's compulsory credit return, seed 003 §6.1).
	// The engine sends the request only if Peer holds more than its quota
	// and has no request outstanding.
	FlowReclaim
	// FlowQuiet asks for nothing: it states that Peer's monitoring points
	// (FlowMonitor) reporting Value as its quota would neither change the
	// policy's state nor make it propose anything, given the events it has
	// seen — and stay so while the engine reports nothing but such
	// monitoring points (of Peer, or of another peer stated quiet in the
	// same Observe). It is the validity window of the decisions made so
	// far: a plugin host need not send those monitoring points, so a policy
	// that has settled costs no round trip (plugins/proxy.go). A policy
	// stating it must not depend on a quiet point's Value or At; an engine
	// ignores it.
	FlowQuiet
)

// FlowDecision is a proposal the credit engine checks and applies.
type FlowDecision struct {
	Kind  FlowDecisionKind
	Peer  int32
	Value int64
}

// FlowControl is a flow-control policy (seed 000 §4, seed 003 §5–6): its
// Setup chooses the credit engine's parameters for a resource, or refuses
// a resource it is not written for.
type FlowControl = Policy[FlowInfo, FlowSetup, FlowEvent, FlowDecision]
