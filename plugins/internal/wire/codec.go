package wire

import (
	"time"

	"github.com/gobtl/gobtl/core"
	pb "github.com/gobtl/gobtl/plugins/policypb"
)

// Codec converts one policy kind's types to and from its protocol
// messages. I, S, E and D are core's info, setup, event and decision
// types; IM and RM the protocol's info and Setup-reply messages, EM and DM
// its event and decision batches.
type Codec[I, S, E, D, IM, RM, EM, DM any] struct {
	Kind       core.Kind
	InfoToPB   func(I) *IM
	InfoFromPB func(*IM) I
	// Reply answers a Setup with the setup or the policy's refusal;
	// FromReply reads the answer back (refusal "" for a setup).
	Reply     func(S, error) *RM
	FromReply func(*RM) (s S, refusal string)
	// PutEvents refills m with a batch numbered seq; GetEvents appends
	// m's events to dst and returns the batch's number.
	PutEvents func(m *EM, seq uint64, es []E)
	GetEvents func(m *EM, dst []E) (uint64, []E, error)
	// PutDecisions refills m with the answer to batch ack; GetDecisions
	// appends m's decisions to dst and returns the batch it answers.
	PutDecisions func(m *DM, ack uint64, ds []D)
	GetDecisions func(m *DM, dst []D) (uint64, []D, error)
}

// FlowCodec, RecvCodec and SchedCodec are the codecs' types.
type (
	FlowCodec  = Codec[core.FlowInfo, core.FlowSetup, core.FlowEvent, core.FlowDecision, pb.FlowInfo, pb.FlowSetupReply, pb.Events, pb.Decisions]
	RecvCodec  = Codec[core.RecvInfo, core.RecvSetup, core.RecvEvent, core.RecvDecision, pb.RecvInfo, pb.RecvSetupReply, pb.Events, pb.Decisions]
	SchedCodec = Codec[core.SchedInfo, core.SchedSetup, core.SchedEvent, core.SchedDecision, pb.SchedInfo, pb.SchedSetupReply, pb.SchedEvents, pb.SchedDecisions]
)

// Flow is the flow-control codec.
var Flow = FlowCodec{
	Kind: core.KindFlowControl,
	InfoToPB: func(i core.FlowInfo) *pb.FlowInfo {
		return &pb.FlowInfo{Resource: uint32(i.Resource), Ranks: int64(i.Ranks), Senders: int64(i.Senders),
			BufferSize: int64(i.BufferSize), Buffers: int64(i.Buffers)}
	},
	InfoFromPB: func(m *pb.FlowInfo) core.FlowInfo {
		return core.FlowInfo{Resource: core.FlowResource(m.GetResource()), Ranks: int(m.GetRanks()), Senders: int(m.GetSenders()),
			BufferSize: int(m.GetBufferSize()), Buffers: int(m.GetBuffers())}
	},
	Reply: reply(func(s core.FlowSetup, refusal string) *pb.FlowSetupReply {
		return &pb.FlowSetupReply{Error: refusal, Setup: &pb.FlowSetup{
			Scheme: uint32(s.Scheme), Quota: int64(s.Quota), MaxQuota: int64(s.MaxQuota),
			CreditThreshold: int64(s.CreditThreshold), RndvOnNoCredit: s.RndvOnNoCredit,
			RnrRetry: int64(s.RNRRetry), MinRnrTimerNs: int64(s.MinRNRTimer),
			CreditSlots: int64(s.CreditSlots), DynamicRegion: s.DynamicRegion,
		}}
	}),
	FromReply: func(r *pb.FlowSetupReply) (core.FlowSetup, string) {
		m := r.GetSetup()
		return core.FlowSetup{Scheme: core.FlowScheme(m.GetScheme()), Quota: int(m.GetQuota()), MaxQuota: int(m.GetMaxQuota()),
			CreditThreshold: int(m.GetCreditThreshold()), RndvOnNoCredit: m.GetRndvOnNoCredit(), RNRRetry: int(m.GetRnrRetry()),
			MinRNRTimer: time.Duration(m.GetMinRnrTimerNs()), CreditSlots: int(m.GetCreditSlots()), DynamicRegion: m.GetDynamicRegion(),
		}, r.GetError()
	},
	PutEvents: putEvents(func(e *core.FlowEvent) eventRow {
		return eventRow{uint32(e.Kind), e.Peer, e.Quota, e.Value, e.At}
	}),
	GetEvents: getEvents("flow", func(r eventRow) core.FlowEvent {
		return core.FlowEvent{Kind: core.FlowEventKind(r.kind), Peer: r.subject, Quota: r.amount, Value: r.value, At: r.at}
	}),
	PutDecisions: putDecisions(func(d *core.FlowDecision) decisionRow { return decisionRow{uint32(d.Kind), d.Peer, d.Value} }),
	GetDecisions: getDecisions("flow", func(r decisionRow) core.FlowDecision {
		return core.FlowDecision{Kind: core.FlowDecisionKind(r.kind), Peer: r.subject, Value: r.value}
	}),
}

// Recv is the receive-buffer codec.
var Recv = RecvCodec{
	Kind: core.KindRecvBuf,
	InfoToPB: func(i core.RecvInfo) *pb.RecvInfo {
		return &pb.RecvInfo{Peers: int64(i.Peers), EagerLimit: int64(i.EagerLimit)}
	},
	InfoFromPB: func(m *pb.RecvInfo) core.RecvInfo {
		return core.RecvInfo{Peers: int(m.GetPeers()), EagerLimit: int(m.GetEagerLimit())}
	},
	Reply: reply(func(s core.RecvSetup, refusal string) *pb.RecvSetupReply {
		m := &pb.RecvSetup{SendFreeListMax: int64(s.SendFreeListMax)}
		for _, q := range s.Queues {
			m.Queues = append(m.Queues, &pb.QueueSpec{Kind: uint32(q.Kind), BufSize: int64(q.BufSize), Count: int64(q.Count),
				Low: int64(q.Low), Max: int64(q.Max), MaxPending: int64(q.MaxPending)})
		}
		return &pb.RecvSetupReply{Error: refusal, Setup: m}
	}),
	FromReply: func(r *pb.RecvSetupReply) (core.RecvSetup, string) {
		m := r.GetSetup()
		s := core.RecvSetup{SendFreeListMax: int(m.GetSendFreeListMax())}
		for _, q := range m.GetQueues() {
			s.Queues = append(s.Queues, core.QueueSpec{Kind: core.QueueKind(q.GetKind()), BufSize: int(q.GetBufSize()), Count: int(q.GetCount()),
				Low: int(q.GetLow()), Max: int(q.GetMax()), MaxPending: int(q.GetMaxPending())})
		}
		return s, r.GetError()
	},
	PutEvents: putEvents(func(e *core.RecvEvent) eventRow {
		return eventRow{uint32(e.Kind), e.Queue, e.Posted, e.Value, e.At}
	}),
	GetEvents: getEvents("recvbuf", func(r eventRow) core.RecvEvent {
		return core.RecvEvent{Kind: core.RecvEventKind(r.kind), Queue: r.subject, Posted: r.amount, Value: r.value, At: r.at}
	}),
	PutDecisions: putDecisions(func(d *core.RecvDecision) decisionRow { return decisionRow{uint32(d.Kind), d.Queue, d.Value} }),
	GetDecisions: getDecisions("recvbuf", func(r decisionRow) core.RecvDecision {
		return core.RecvDecision{Kind: core.RecvDecisionKind(r.kind), Queue: r.subject, Value: r.value}
	}),
}

// Sched is the scheduling codec.
var Sched = SchedCodec{
	Kind: core.KindSched,
	InfoToPB: func(i core.SchedInfo) *pb.SchedInfo {
		m := &pb.SchedInfo{Peer: int64(i.Peer), LocalRank: int64(i.LocalRank), LocalRanks: int64(i.LocalRanks)}
		for _, s := range i.Subchannels {
			m.Subchannels = append(m.Subchannels, &pb.Subchannel{Name: s.Name, Bandwidth: s.Bandwidth, LatencyNs: int64(s.Latency)})
		}
		return m
	},
	InfoFromPB: func(m *pb.SchedInfo) core.SchedInfo {
		i := core.SchedInfo{Peer: int(m.GetPeer()), LocalRank: int(m.GetLocalRank()), LocalRanks: int(m.GetLocalRanks())}
		for _, s := range m.GetSubchannels() {
			i.Subchannels = append(i.Subchannels, core.SubchannelInfo{Name: s.GetName(), Bandwidth: s.GetBandwidth(), Latency: time.Duration(s.GetLatencyNs())})
		}
		return i
	},
	Reply: reply(func(s core.SchedSetup, refusal string) *pb.SchedSetupReply {
		return &pb.SchedSetupReply{Error: refusal, Setup: &pb.SchedSetup{Small: uint32(s.Small), Large: uint32(s.Large),
			StripeThreshold: s.StripeThreshold, MinStripe: s.MinStripe, Window: int64(s.Window),
			Weights: append([]float64(nil), s.Weights...), TotalWeight: s.TotalWeight, Bind: int64(s.Bind)}}
	}),
	FromReply: func(r *pb.SchedSetupReply) (core.SchedSetup, string) {
		m := r.GetSetup()
		return core.SchedSetup{Small: core.SchedMode(m.GetSmall()), Large: core.SchedMode(m.GetLarge()),
			StripeThreshold: m.GetStripeThreshold(), MinStripe: m.GetMinStripe(), Window: int(m.GetWindow()),
			Weights: append([]float64(nil), m.GetWeights()...), TotalWeight: m.GetTotalWeight(), Bind: int(m.GetBind()),
		}, r.GetError()
	},
	PutEvents:    putSchedEvents,
	GetEvents:    getSchedEvents,
	PutDecisions: putSchedDecisions,
	GetDecisions: getSchedDecisions,
}

// reply makes a codec's Reply from the function that writes a reply
// message: a refused Setup carries its error and an empty setup.
func reply[S, RM any](write func(s S, refusal string) *RM) func(S, error) *RM {
	return func(s S, err error) *RM {
		if err != nil {
			var zero S
			return write(zero, err.Error())
		}
		return write(s, "")
	}
}
