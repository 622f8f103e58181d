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
	// CreditSlots per peer for EXTOLL (seed 003 §5).
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
