package core

import (
	"errors"
	"fmt"
)

// MechRule is what a module proposes for the rendezvous data of messages
// in one size range: a single copy by RDMA (CMA for shared memory) or its
// send-based copy pipeline, and the pipeline's shape. A size alone cannot
// choose between the two on shared memory: one message at a time, the
// receiver's single copy has the lower latency; with a window of messages
// in flight, the copy-in/copy-out pipeline, where both processes copy at
// once, moves more bytes a second. So a rule also names the depth of the
// queue to the peer up to which the single copy is worth it.
type MechRule struct {
	// Max is the largest message, in user bytes, the rule covers; 0 means
	// no bound (only the last rule may have it). The rules of a table
	// cover consecutive ranges: a rule starts above the previous one's Max.
	Max int64
	// RDMADepth: the data moves by RDMA while at most RDMADepth other
	// rendezvous sends to the same peer are in flight, else by the
	// pipeline. 0: only when the message is alone; NoRDMA: never.
	RDMADepth int
	// Frag is the pipeline's fragment payload in bytes, at most the
	// module's MaxSendSize; 0: MaxSendSize.
	Frag int
	// Depth bounds the pipeline fragments of one message in flight (sent,
	// not yet consumed by the receiver), for endpoints that count them
	// (Resources.FragsInFlight); 0: as many as the module takes.
	Depth int
	// Choose lets the receiver turn a message the rule would move by RDMA
	// into a pipelined one, message by message, by how fast each
	// mechanism delivered the peer's earlier messages of its size: when
	// the faster one depends on a state that changes within seconds
	// (which cores the host runs the two processes on, what else shares
	// them), no table fixed at start-up can follow it. The PML measures
	// and chooses (pml/choose.go); the module's table only says where
	// the choice is worth having. The rule still decides where RDMA is
	// allowed at all; the pipeline is always.
	Choose bool
}

// NoRDMA as a MechRule's RDMADepth keeps its sizes on the copy pipeline.
const NoRDMA = -1

// UseRDMA reports whether the rule moves a message by RDMA when inflight
// other rendezvous sends to its peer are under way.
func (r *MechRule) UseRDMA(inflight int) bool { return inflight <= r.RDMADepth }

// MechTable is a module's rules by size, sorted by Max.
type MechTable []MechRule

// Lookup returns the rule for a message of size bytes, or nil when the
// table is empty or no rule covers size.
func (t MechTable) Lookup(size int64) *MechRule {
	for i := range t {
		if t[i].Max == 0 || size <= t[i].Max {
			return &t[i]
		}
	}
	return nil
}

// Validate checks that the rules cover increasing ranges, the last one
// open-ended, and that every fragment fits a module whose largest frame
// payload is maxSend (0: unchecked).
func (t MechTable) Validate(maxSend int) error {
	if len(t) == 0 {
		return errors.New("no rules")
	}
	for i, r := range t {
		last := i == len(t)-1
		switch {
		case r.Max < 0:
			return fmt.Errorf("rule %d: max %d is negative", i+1, r.Max)
		case r.Max == 0 && !last:
			return fmt.Errorf("rule %d: only the last rule may have no max (rule %d follows)", i+1, i+2)
		case r.Max != 0 && last:
			return fmt.Errorf("rule %d: the last rule must cover every larger size (max 0), not stop at %s", i+1, FormatSize(r.Max))
		case i > 0 && r.Max != 0 && r.Max <= t[i-1].Max:
			return fmt.Errorf("rule %d: max %s does not exceed the previous rule's %s (rules go by increasing max)",
				i+1, FormatSize(r.Max), FormatSize(t[i-1].Max))
		case r.RDMADepth < NoRDMA:
			return fmt.Errorf("rule %d: single-copy depth %d (want %d for never, or 0 and up)", i+1, r.RDMADepth, NoRDMA)
		case r.Frag < 0:
			return fmt.Errorf("rule %d: fragment %d is negative", i+1, r.Frag)
		case maxSend > 0 && r.Frag > maxSend:
			return fmt.Errorf("rule %d: fragment %s exceeds max_send_size %s", i+1,
				FormatSize(int64(r.Frag)), FormatSize(int64(maxSend)))
		case r.Depth < 0:
			return fmt.Errorf("rule %d: depth %d is negative", i+1, r.Depth)
		}
	}
	return nil
}
