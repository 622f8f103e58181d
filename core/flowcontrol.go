package core

import "time"

// FlowScheme is the mechanism a flow-control policy asks a transport's
// credit engine to run.
type FlowScheme uint8

const (
	// FlowNone: no user-level flow control. On InfiniBand the hardware's
	// RNR NAK and retry hold the sender back (seed 000 §4.1); on EXTOLL a
	// full mailbox blocks the sender (seed 003 §4).
	FlowNone FlowScheme = iota
	// FlowCredits: user-level credits, one per receive buffer or slot.
	FlowCredits
)

// FlowInfo tells a flow-control policy about the transport it serves.
type FlowInfo struct {
	Transport  string // "ib", "extoll"
	Peers      int    // senders a receiver may hear from
	BufferSize int    // bytes of one receive buffer or mailbox slot
	Buffers    int    // buffers or slots available to all peers; 0 = not bounded
}

// FlowSetup are the credit engine's parameters chosen by a policy.
type FlowSetup struct {
	Scheme FlowScheme
	// InitialPosted buffers per peer, and the most a peer may grow to.
	InitialPosted int
	MaxPosted     int
	// CreditThreshold: an explicit credit message goes out when this many
	// credits are owed and no other frame is going that way (seed 000: 5).
	CreditThreshold int
	// RndvOnNoCredit sends small messages by rendezvous while the peer is
	// out of credits (seed 000 §4.2).
	RndvOnNoCredit bool
	// RNRRetry (7 = infinite) and MinRNRTimer for the hardware scheme.
	RNRRetry    int
	MinRNRTimer time.Duration
	// CreditSlots per peer for EXTOLL (seed 003 §5). On EXTOLL,
	// InitialPosted is a sender's credit quota (0: an equal share of the
	// data region), MaxPosted caps a quota (0: no cap), FlowSetPosted sets
	// a sender's intended quota, and CreditThreshold is the static
	// threshold (0: Equation 1).
	CreditSlots int
	// Dynamic enables EXTOLL's dynamic region (seed 003 §6).
	Dynamic bool
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
	// granted to it since the last one (seed 003 §6.4). Posted is its
	// intended quota, Value the credits it holds now.
	FlowMonitor
	// FlowQuota: the engine set Peer's quota to Posted, applying or clamping
	// a decision; a policy that keeps a copy of the quotas resyncs from it.
	FlowQuota
)

// FlowEvent is something the credit engine saw.
type FlowEvent struct {
	Kind   FlowEventKind
	Peer   int32
	Posted int32 // buffers currently posted for Peer
	Value  int64
	At     time.Duration
}

// FlowDecisionKind says what a FlowDecision asks for.
type FlowDecisionKind uint8

const (
	// FlowSetPosted asks for Value buffers posted for Peer. The engine
	// clamps it to [InitialPosted, MaxPosted] and never takes away a buffer
	// that is posted and owed.
	FlowSetPosted FlowDecisionKind = iota + 1
	// FlowSetThreshold sets the explicit-credit threshold to Value.
	FlowSetThreshold
	// FlowReclaim asks Peer to give back the credits it holds beyond its
	// quota (EXTOLL's compulsory credit return, seed 003 §6.1). The engine
	// sends the request only if Peer holds more than its quota and has no
	// request outstanding.
	FlowReclaim
)

// FlowDecision is a proposal the credit engine checks and applies.
type FlowDecision struct {
	Kind  FlowDecisionKind
	Peer  int32
	Value int64
}

// FlowControl is a flow-control policy (seed 000 §4, seed 003 §5–6).
// Built in, it is called synchronously; as a plugin, events reach it in
// batches and its decisions are applied when they arrive.
type FlowControl interface {
	// Setup chooses the engine's parameters.
	Setup(info FlowInfo) (FlowSetup, error)
	// Observe reacts to a batch of events, appending decisions to out.
	Observe(events []FlowEvent, out []FlowDecision) []FlowDecision
}
