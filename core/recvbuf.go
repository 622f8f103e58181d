package core

import "time"

// QueueKind says who a receive queue serves.
type QueueKind uint8

const (
	// QueuePerPeer: each peer has its own buffers, under credits.
	QueuePerPeer QueueKind = iota + 1
	// QueueShared: one shared receive queue for all peers (an SRQ).
	QueueShared
)

// QueueSpec describes one receive queue (one entry of Open MPI's
// receive_queues: "P,128,256,192,128" or "S,2048,1024,1008,64").
type QueueSpec struct {
	Kind    QueueKind
	BufSize int // bytes per buffer
	Count   int // buffers posted initially (per peer for QueuePerPeer)
	Low     int // credit-return watermark (P) or srq_limit (S)
	Max     int // most buffers the queue may grow to (0: Count)
	// MaxPending bounds a sender's frames outstanding to one peer on a
	// shared queue (the fifth field of an Open MPI "S" queue); 0: no bound.
	MaxPending int
}

// RecvInfo tells a receive-buffer policy about the transport.
type RecvInfo struct {
	Peers      int
	EagerLimit int // the largest frame payload the queues must hold
}

// RecvSetup is the receive-buffer layout chosen by a policy. Queues are
// sorted by BufSize; a sender picks the smallest that fits (seed 002 §3).
type RecvSetup struct {
	Queues []QueueSpec
	// SendFreeListMax bounds each send free list's growth.
	SendFreeListMax int
}

// RecvEventKind says what a RecvEvent reports.
type RecvEventKind uint8

const (
	// RecvLimit: the shared queue Queue fell below its limit (the SRQ
	// limit-reached async event); Value is how many are posted.
	RecvLimit RecvEventKind = iota + 1
	// RecvExhausted: a frame found no buffer on Queue (an RNR NAK).
	RecvExhausted
)

// RecvEvent is something the receive-buffer mechanism saw.
type RecvEvent struct {
	Kind   RecvEventKind
	Queue  int32
	Posted int32
	Value  int64
	At     time.Duration
}

// RecvDecisionKind says what a RecvDecision asks for.
type RecvDecisionKind uint8

const (
	// RecvGrow asks for Value more buffers on Queue (up to its Max).
	RecvGrow RecvDecisionKind = iota + 1
	// RecvSetLimit sets Queue's srq_limit to Value.
	RecvSetLimit
)

// RecvDecision is a proposal the mechanism checks and applies.
type RecvDecision struct {
	Kind  RecvDecisionKind
	Queue int32
	Value int64
}

// RecvBuffers is a receive-buffer policy: per-peer, SRQ or B-SRQ (seed 002).
type RecvBuffers interface {
	Setup(info RecvInfo) (RecvSetup, error)
	Observe(events []RecvEvent, out []RecvDecision) []RecvDecision
}
