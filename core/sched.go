package core

import "time"

// SchedMode is a multirail scheduling policy of seed 001 §4.4–4.5.
type SchedMode uint8

const (
	// SchedBinding uses one subchannel for everything.
	SchedBinding SchedMode = iota + 1
	// SchedRoundRobin multiplexes messages over subchannels in turn.
	SchedRoundRobin
	// SchedWeightedRoundRobin multiplexes in proportion to weights.
	SchedWeightedRoundRobin
	// SchedWindowRoundRobin sends Window messages on a subchannel before
	// moving to the next.
	SchedWindowRoundRobin
	// SchedEvenStriping cuts RDMA data into equal stripes.
	SchedEvenStriping
	// SchedWeightedStriping cuts RDMA data by static weights.
	SchedWeightedStriping
	// SchedAdaptiveStriping cuts RDMA data by weights the policy adjusts
	// from stripe delivery times (equations 1–4).
	SchedAdaptiveStriping
)

var schedModeNames = map[SchedMode]string{
	SchedBinding: "binding", SchedRoundRobin: "round_robin",
	SchedWeightedRoundRobin: "weighted_round_robin", SchedWindowRoundRobin: "window_round_robin",
	SchedEvenStriping: "even_striping", SchedWeightedStriping: "weighted_striping",
	SchedAdaptiveStriping: "adaptive_striping",
}

func (m SchedMode) String() string {
	if s, ok := schedModeNames[m]; ok {
		return s
	}
	return "unknown"
}

// Striping reports whether m cuts messages into stripes.
func (m SchedMode) Striping() bool {
	return m == SchedEvenStriping || m == SchedWeightedStriping || m == SchedAdaptiveStriping
}

// ParseSchedMode parses a policy name as written in HCL.
func ParseSchedMode(s string) (SchedMode, bool) {
	for m, n := range schedModeNames {
		if n == s {
			return m, true
		}
	}
	return 0, false
}

// SubchannelInfo describes one subchannel of a virtual channel.
type SubchannelInfo struct {
	Name      string
	Bandwidth float64 // bytes/s as the module reports it
	Latency   time.Duration
}

// SchedInfo tells a scheduling policy about one peer's virtual channel.
type SchedInfo struct {
	Peer        int
	Subchannels []SubchannelInfo
	// LocalRank and LocalRanks place this process among the ranks of its
	// host, for per-process binding.
	LocalRank, LocalRanks int
}

// SchedSetup is what the communication scheduler runs for one peer.
type SchedSetup struct {
	// Small is the multiplexing mode for eager and control frames; Large
	// the mode for RDMA data at least StripeThreshold bytes long.
	Small, Large    SchedMode
	StripeThreshold int64
	// MinStripe is the smallest stripe the scheduler cuts.
	MinStripe int64
	// Window is W for SchedWindowRoundRobin.
	Window int
	// Weights per subchannel; they sum to TotalWeight.
	Weights     []float64
	TotalWeight float64
	// Bind is the subchannel of SchedBinding.
	Bind int
}

// SchedEventKind says what a SchedEvent reports.
type SchedEventKind uint8

const (
	// SchedStripeDone: one stripe of message Msg, Bytes long, took Time on
	// subchannel Sub (handed to the device until its completion). The
	// stripes of one message arrive together, Last set on the final one.
	SchedStripeDone SchedEventKind = iota + 1
)

// SchedEvent is feedback from the completion filter.
type SchedEvent struct {
	Kind  SchedEventKind
	Peer  int32
	Sub   int32
	Last  bool
	Msg   uint64
	Bytes int64
	Time  time.Duration
}

// SchedDecisionKind says what a SchedDecision asks for.
type SchedDecisionKind uint8

const (
	// SchedSetWeight sets Sub's weight for Peer. A batch of these replaces
	// the weights; the scheduler normalises them to TotalWeight and rejects
	// negative or non-finite ones.
	SchedSetWeight SchedDecisionKind = iota + 1
)

// SchedDecision is a proposal the scheduler checks and applies.
type SchedDecision struct {
	Kind   SchedDecisionKind
	Peer   int32
	Sub    int32
	Weight float64
}

// Scheduler is a multirail scheduling policy (seed 001 §4.4–4.5); Setup
// is called once per peer.
type Scheduler = Policy[SchedInfo, SchedSetup, SchedEvent, SchedDecision]
