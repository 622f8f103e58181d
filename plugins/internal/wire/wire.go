// Package wire converts between gobtl's policy types (package core) and
// the plugin protocol's messages (package policypb), for both ends: the
// host in package plugins and the plugin side in plugins/sdk.
//
// Event and decision batches travel in columns; the Append functions
// refill a message the caller keeps and reuses, so that encoding a batch
// allocates nothing once the columns have grown to the batch size.
package wire

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
	pb "github.com/gobtl/gobtl/plugins/policypb"
)

// ProtocolVersion is the version of the plugin protocol in policypb. The
// host and the SDK negotiate it in go-plugin's handshake; a new,
// incompatible protocol gets a new number and both ends list every
// version they still speak.
const ProtocolVersion = 1

// MagicCookieKey and MagicCookieValue identify a gobtl policy plugin: a
// plugin started without them in its environment refuses to run, and an
// executable that is not a gobtl plugin never answers the handshake.
const (
	MagicCookieKey   = "GOBTL_POLICY_PLUGIN"
	MagicCookieValue = "7f3c1e0a-gobtl-policy"
)

// Service names, as registered in the go-plugin plugin set: one per
// policy kind plus "plugin" for the descriptive service every plugin serves.
const ServicePlugin = "plugin"

// ---- flow control ----

// FlowInfoToPB converts a FlowInfo.
func FlowInfoToPB(i core.FlowInfo) *pb.FlowInfo {
	return &pb.FlowInfo{Transport: i.Transport, Peers: int64(i.Peers), BufferSize: int64(i.BufferSize), Buffers: int64(i.Buffers)}
}

// FlowInfoFromPB converts a FlowInfo.
func FlowInfoFromPB(m *pb.FlowInfo) core.FlowInfo {
	return core.FlowInfo{Transport: m.GetTransport(), Peers: int(m.GetPeers()), BufferSize: int(m.GetBufferSize()), Buffers: int(m.GetBuffers())}
}

// FlowSetupToPB converts a FlowSetup.
func FlowSetupToPB(s core.FlowSetup) *pb.FlowSetup {
	return &pb.FlowSetup{
		Scheme: uint32(s.Scheme), InitialPosted: int64(s.InitialPosted), MaxPosted: int64(s.MaxPosted),
		CreditThreshold: int64(s.CreditThreshold), RndvOnNoCredit: s.RndvOnNoCredit,
		RnrRetry: int64(s.RNRRetry), MinRnrTimerNs: int64(s.MinRNRTimer),
		CreditSlots: int64(s.CreditSlots), Dynamic: s.Dynamic,
	}
}

// FlowSetupFromPB converts a FlowSetup.
func FlowSetupFromPB(m *pb.FlowSetup) core.FlowSetup {
	return core.FlowSetup{
		Scheme: core.FlowScheme(m.GetScheme()), InitialPosted: int(m.GetInitialPosted()), MaxPosted: int(m.GetMaxPosted()),
		CreditThreshold: int(m.GetCreditThreshold()), RndvOnNoCredit: m.GetRndvOnNoCredit(),
		RNRRetry: int(m.GetRnrRetry()), MinRNRTimer: time.Duration(m.GetMinRnrTimerNs()),
		CreditSlots: int(m.GetCreditSlots()), Dynamic: m.GetDynamic(),
	}
}

// AppendFlowEvents refills m with seq and es.
func AppendFlowEvents(m *pb.FlowEvents, seq uint64, es []core.FlowEvent) {
	m.Seq = seq
	m.Kind, m.Peer, m.Posted, m.Value, m.AtNs = m.Kind[:0], m.Peer[:0], m.Posted[:0], m.Value[:0], m.AtNs[:0]
	for i := range es {
		e := &es[i]
		m.Kind = append(m.Kind, uint32(e.Kind))
		m.Peer = append(m.Peer, e.Peer)
		m.Posted = append(m.Posted, e.Posted)
		m.Value = append(m.Value, e.Value)
		m.AtNs = append(m.AtNs, int64(e.At))
	}
}

// FlowEventsFromPB appends m's events to dst.
func FlowEventsFromPB(m *pb.FlowEvents, dst []core.FlowEvent) ([]core.FlowEvent, error) {
	n := len(m.Kind)
	if len(m.Peer) != n || len(m.Posted) != n || len(m.Value) != n || len(m.AtNs) != n {
		return dst, fmt.Errorf("flow events batch %d: columns of unequal length", m.Seq)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, core.FlowEvent{
			Kind: core.FlowEventKind(m.Kind[i]), Peer: m.Peer[i], Posted: m.Posted[i],
			Value: m.Value[i], At: time.Duration(m.AtNs[i]),
		})
	}
	return dst, nil
}

// AppendFlowDecisions refills m with ack and ds.
func AppendFlowDecisions(m *pb.FlowDecisions, ack uint64, ds []core.FlowDecision) {
	m.Ack = ack
	m.Kind, m.Peer, m.Value = m.Kind[:0], m.Peer[:0], m.Value[:0]
	for i := range ds {
		d := &ds[i]
		m.Kind = append(m.Kind, uint32(d.Kind))
		m.Peer = append(m.Peer, d.Peer)
		m.Value = append(m.Value, d.Value)
	}
}

// FlowDecisionsFromPB appends m's decisions to dst.
func FlowDecisionsFromPB(m *pb.FlowDecisions, dst []core.FlowDecision) ([]core.FlowDecision, error) {
	n := len(m.Kind)
	if len(m.Peer) != n || len(m.Value) != n {
		return dst, fmt.Errorf("flow decisions for batch %d: columns of unequal length", m.Ack)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, core.FlowDecision{Kind: core.FlowDecisionKind(m.Kind[i]), Peer: m.Peer[i], Value: m.Value[i]})
	}
	return dst, nil
}

// ---- receive buffers ----

// RecvInfoToPB converts a RecvInfo.
func RecvInfoToPB(i core.RecvInfo) *pb.RecvInfo {
	return &pb.RecvInfo{Peers: int64(i.Peers), EagerLimit: int64(i.EagerLimit)}
}

// RecvInfoFromPB converts a RecvInfo.
func RecvInfoFromPB(m *pb.RecvInfo) core.RecvInfo {
	return core.RecvInfo{Peers: int(m.GetPeers()), EagerLimit: int(m.GetEagerLimit())}
}

// RecvSetupToPB converts a RecvSetup.
func RecvSetupToPB(s core.RecvSetup) *pb.RecvSetup {
	m := &pb.RecvSetup{SendFreeListMax: int64(s.SendFreeListMax)}
	for _, q := range s.Queues {
		m.Queues = append(m.Queues, &pb.QueueSpec{Kind: uint32(q.Kind), BufSize: int64(q.BufSize), Count: int64(q.Count), Low: int64(q.Low), Max: int64(q.Max), MaxPending: int64(q.MaxPending)})
	}
	return m
}

// RecvSetupFromPB converts a RecvSetup.
func RecvSetupFromPB(m *pb.RecvSetup) core.RecvSetup {
	s := core.RecvSetup{SendFreeListMax: int(m.GetSendFreeListMax())}
	for _, q := range m.GetQueues() {
		s.Queues = append(s.Queues, core.QueueSpec{Kind: core.QueueKind(q.GetKind()), BufSize: int(q.GetBufSize()), Count: int(q.GetCount()), Low: int(q.GetLow()), Max: int(q.GetMax()), MaxPending: int(q.GetMaxPending())})
	}
	return s
}

// AppendRecvEvents refills m with seq and es.
func AppendRecvEvents(m *pb.RecvEvents, seq uint64, es []core.RecvEvent) {
	m.Seq = seq
	m.Kind, m.Queue, m.Posted, m.Value, m.AtNs = m.Kind[:0], m.Queue[:0], m.Posted[:0], m.Value[:0], m.AtNs[:0]
	for i := range es {
		e := &es[i]
		m.Kind = append(m.Kind, uint32(e.Kind))
		m.Queue = append(m.Queue, e.Queue)
		m.Posted = append(m.Posted, e.Posted)
		m.Value = append(m.Value, e.Value)
		m.AtNs = append(m.AtNs, int64(e.At))
	}
}

// RecvEventsFromPB appends m's events to dst.
func RecvEventsFromPB(m *pb.RecvEvents, dst []core.RecvEvent) ([]core.RecvEvent, error) {
	n := len(m.Kind)
	if len(m.Queue) != n || len(m.Posted) != n || len(m.Value) != n || len(m.AtNs) != n {
		return dst, fmt.Errorf("recvbuf events batch %d: columns of unequal length", m.Seq)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, core.RecvEvent{
			Kind: core.RecvEventKind(m.Kind[i]), Queue: m.Queue[i], Posted: m.Posted[i],
			Value: m.Value[i], At: time.Duration(m.AtNs[i]),
		})
	}
	return dst, nil
}

// AppendRecvDecisions refills m with ack and ds.
func AppendRecvDecisions(m *pb.RecvDecisions, ack uint64, ds []core.RecvDecision) {
	m.Ack = ack
	m.Kind, m.Queue, m.Value = m.Kind[:0], m.Queue[:0], m.Value[:0]
	for i := range ds {
		d := &ds[i]
		m.Kind = append(m.Kind, uint32(d.Kind))
		m.Queue = append(m.Queue, d.Queue)
		m.Value = append(m.Value, d.Value)
	}
}

// RecvDecisionsFromPB appends m's decisions to dst.
func RecvDecisionsFromPB(m *pb.RecvDecisions, dst []core.RecvDecision) ([]core.RecvDecision, error) {
	n := len(m.Kind)
	if len(m.Queue) != n || len(m.Value) != n {
		return dst, fmt.Errorf("recvbuf decisions for batch %d: columns of unequal length", m.Ack)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, core.RecvDecision{Kind: core.RecvDecisionKind(m.Kind[i]), Queue: m.Queue[i], Value: m.Value[i]})
	}
	return dst, nil
}

// ---- scheduling ----

// SchedInfoToPB converts a SchedInfo.
func SchedInfoToPB(i core.SchedInfo) *pb.SchedInfo {
	m := &pb.SchedInfo{Peer: int64(i.Peer), LocalRank: int64(i.LocalRank), LocalRanks: int64(i.LocalRanks)}
	for _, s := range i.Subchannels {
		m.Subchannels = append(m.Subchannels, &pb.Subchannel{Name: s.Name, Bandwidth: s.Bandwidth, LatencyNs: int64(s.Latency)})
	}
	return m
}

// SchedInfoFromPB converts a SchedInfo.
func SchedInfoFromPB(m *pb.SchedInfo) core.SchedInfo {
	i := core.SchedInfo{Peer: int(m.GetPeer()), LocalRank: int(m.GetLocalRank()), LocalRanks: int(m.GetLocalRanks())}
	for _, s := range m.GetSubchannels() {
		i.Subchannels = append(i.Subchannels, core.SubchannelInfo{Name: s.GetName(), Bandwidth: s.GetBandwidth(), Latency: time.Duration(s.GetLatencyNs())})
	}
	return i
}

// SchedSetupToPB converts a SchedSetup.
func SchedSetupToPB(s core.SchedSetup) *pb.SchedSetup {
	return &pb.SchedSetup{
		Small: uint32(s.Small), Large: uint32(s.Large), StripeThreshold: s.StripeThreshold,
		MinStripe: s.MinStripe, Window: int64(s.Window), Weights: append([]float64(nil), s.Weights...),
		TotalWeight: s.TotalWeight, Bind: int64(s.Bind),
	}
}

// SchedSetupFromPB converts a SchedSetup.
func SchedSetupFromPB(m *pb.SchedSetup) core.SchedSetup {
	return core.SchedSetup{
		Small: core.SchedMode(m.GetSmall()), Large: core.SchedMode(m.GetLarge()), StripeThreshold: m.GetStripeThreshold(),
		MinStripe: m.GetMinStripe(), Window: int(m.GetWindow()), Weights: append([]float64(nil), m.GetWeights()...),
		TotalWeight: m.GetTotalWeight(), Bind: int(m.GetBind()),
	}
}

// AppendSchedEvents refills m with seq and es.
func AppendSchedEvents(m *pb.SchedEvents, seq uint64, es []core.SchedEvent) {
	m.Seq = seq
	m.Kind, m.Peer, m.Sub, m.Last, m.Msg, m.Bytes, m.TimeNs = m.Kind[:0], m.Peer[:0], m.Sub[:0], m.Last[:0], m.Msg[:0], m.Bytes[:0], m.TimeNs[:0]
	for i := range es {
		e := &es[i]
		m.Kind = append(m.Kind, uint32(e.Kind))
		m.Peer = append(m.Peer, e.Peer)
		m.Sub = append(m.Sub, e.Sub)
		m.Last = append(m.Last, e.Last)
		m.Msg = append(m.Msg, e.Msg)
		m.Bytes = append(m.Bytes, e.Bytes)
		m.TimeNs = append(m.TimeNs, int64(e.Time))
	}
}

// SchedEventsFromPB appends m's events to dst.
func SchedEventsFromPB(m *pb.SchedEvents, dst []core.SchedEvent) ([]core.SchedEvent, error) {
	n := len(m.Kind)
	if len(m.Peer) != n || len(m.Sub) != n || len(m.Last) != n || len(m.Msg) != n || len(m.Bytes) != n || len(m.TimeNs) != n {
		return dst, fmt.Errorf("sched events batch %d: columns of unequal length", m.Seq)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, core.SchedEvent{
			Kind: core.SchedEventKind(m.Kind[i]), Peer: m.Peer[i], Sub: m.Sub[i], Last: m.Last[i],
			Msg: m.Msg[i], Bytes: m.Bytes[i], Time: time.Duration(m.TimeNs[i]),
		})
	}
	return dst, nil
}

// AppendSchedDecisions refills m with ack and ds.
func AppendSchedDecisions(m *pb.SchedDecisions, ack uint64, ds []core.SchedDecision) {
	m.Ack = ack
	m.Kind, m.Peer, m.Sub, m.Weight = m.Kind[:0], m.Peer[:0], m.Sub[:0], m.Weight[:0]
	for i := range ds {
		d := &ds[i]
		m.Kind = append(m.Kind, uint32(d.Kind))
		m.Peer = append(m.Peer, d.Peer)
		m.Sub = append(m.Sub, d.Sub)
		m.Weight = append(m.Weight, d.Weight)
	}
}

// SchedDecisionsFromPB appends m's decisions to dst.
func SchedDecisionsFromPB(m *pb.SchedDecisions, dst []core.SchedDecision) ([]core.SchedDecision, error) {
	n := len(m.Kind)
	if len(m.Peer) != n || len(m.Sub) != n || len(m.Weight) != n {
		return dst, fmt.Errorf("sched decisions for batch %d: columns of unequal length", m.Ack)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, core.SchedDecision{Kind: core.SchedDecisionKind(m.Kind[i]), Peer: m.Peer[i], Sub: m.Sub[i], Weight: m.Weight[i]})
	}
	return dst, nil
}
