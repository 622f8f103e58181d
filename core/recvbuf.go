package core

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

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
type RecvBuffers = Policy[RecvInfo, RecvSetup, RecvEvent, RecvDecision]

// String renders the layout in Open MPI's receive_queues syntax (per-peer
// queues with their default low watermark), as policies/recvbuf parses it.
func (s RecvSetup) String() string {
	parts := make([]string, len(s.Queues))
	for i, q := range s.Queues {
		if q.Kind == QueuePerPeer {
			parts[i] = fmt.Sprintf("P,%d,%d,%d,%d", q.BufSize, q.Count, q.Count*3/4, q.Low)
		} else {
			parts[i] = fmt.Sprintf("S,%d,%d,%d,%d", q.BufSize, q.Count, q.Low, q.MaxPending)
		}
	}
	return strings.Join(parts, ":")
}

// Check validates a layout against the transport: sorted, distinct sizes
// big enough for a header, the largest holding an eager frame, sane counts
// and watermarks. Mechanisms call it on every policy's answer.
func (s RecvSetup) Check(info RecvInfo) error {
	if len(s.Queues) == 0 {
		return fmt.Errorf("receive queues: none")
	}
	if !sort.SliceIsSorted(s.Queues, func(i, j int) bool { return s.Queues[i].BufSize < s.Queues[j].BufSize }) {
		return fmt.Errorf("receive queues: not sorted by buffer size: %s", s)
	}
	for i, q := range s.Queues {
		where := fmt.Sprintf("receive queue %d (%d-byte buffers)", i, q.BufSize)
		switch {
		case q.Kind != QueuePerPeer && q.Kind != QueueShared:
			return fmt.Errorf("%s: unknown kind %d", where, q.Kind)
		case q.BufSize < HeaderSize+8:
			return fmt.Errorf("%s: smaller than a %d-byte header plus 8 bytes", where, HeaderSize)
		case i > 0 && q.BufSize == s.Queues[i-1].BufSize:
			return fmt.Errorf("%s: two queues of the same size", where)
		case q.Count < 1:
			return fmt.Errorf("%s: no buffers", where)
		case q.Max != 0 && q.Max < q.Count:
			return fmt.Errorf("%s: may grow to %d, fewer than its %d buffers", where, q.Max, q.Count)
		case q.Low < 0 || q.Low > q.Count:
			return fmt.Errorf("%s: watermark %d not in [0, %d]", where, q.Low, q.Count)
		case q.Kind == QueuePerPeer && q.Low < 1:
			return fmt.Errorf("%s: a per-peer queue needs a credit window of at least 1", where)
		case q.MaxPending < 0:
			return fmt.Errorf("%s: negative max pending", where)
		}
	}
	if top := s.Queues[len(s.Queues)-1].BufSize - HeaderSize; top < info.EagerLimit {
		return fmt.Errorf("receive queues: the largest buffer holds %d payload bytes, less than the eager limit %d", top, info.EagerLimit)
	}
	if s.SendFreeListMax < 0 {
		return fmt.Errorf("receive queues: negative send free list bound")
	}
	return nil
}
