package wire

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
	pb "github.com/gobtl/gobtl/plugins/policypb"
)

// Flow control and receive buffers share their batch messages: an event
// is a kind, a subject (a peer's rank, or a queue), an amount (the peer's
// quota, or the queue's posted buffers), a value and a time; a decision
// a kind, a subject and a value. Each codec maps its core types to rows.

// columns reports whether a batch's other columns are as long as its
// first, n: a batch of unequal columns is refused whole.
func columns(n int, lens ...int) bool {
	for _, l := range lens {
		if l != n {
			return false
		}
	}
	return true
}

type eventRow struct {
	kind            uint32
	subject, amount int32
	value           int64
	at              time.Duration
}

type decisionRow struct {
	kind    uint32
	subject int32
	value   int64
}

func putEvents[E any](row func(*E) eventRow) func(*pb.Events, uint64, []E) {
	return func(m *pb.Events, seq uint64, es []E) {
		m.Seq = seq
		m.Kind, m.Subject, m.Amount, m.Value, m.AtNs = m.Kind[:0], m.Subject[:0], m.Amount[:0], m.Value[:0], m.AtNs[:0]
		for i := range es {
			r := row(&es[i])
			m.Kind = append(m.Kind, r.kind)
			m.Subject = append(m.Subject, r.subject)
			m.Amount = append(m.Amount, r.amount)
			m.Value = append(m.Value, r.value)
			m.AtNs = append(m.AtNs, int64(r.at))
		}
	}
}

func getEvents[E any](what string, event func(eventRow) E) func(*pb.Events, []E) (uint64, []E, error) {
	return func(m *pb.Events, dst []E) (uint64, []E, error) {
		n := len(m.Kind)
		if !columns(n, len(m.Subject), len(m.Amount), len(m.Value), len(m.AtNs)) {
			return m.Seq, dst, fmt.Errorf("%s events batch %d: columns of unequal length", what, m.Seq)
		}
		for i := 0; i < n; i++ {
			dst = append(dst, event(eventRow{m.Kind[i], m.Subject[i], m.Amount[i], m.Value[i], time.Duration(m.AtNs[i])}))
		}
		return m.Seq, dst, nil
	}
}

func putDecisions[D any](row func(*D) decisionRow) func(*pb.Decisions, uint64, []D) {
	return func(m *pb.Decisions, ack uint64, ds []D) {
		m.Ack = ack
		m.Kind, m.Subject, m.Value = m.Kind[:0], m.Subject[:0], m.Value[:0]
		for i := range ds {
			r := row(&ds[i])
			m.Kind = append(m.Kind, r.kind)
			m.Subject = append(m.Subject, r.subject)
			m.Value = append(m.Value, r.value)
		}
	}
}

func getDecisions[D any](what string, decision func(decisionRow) D) func(*pb.Decisions, []D) (uint64, []D, error) {
	return func(m *pb.Decisions, dst []D) (uint64, []D, error) {
		n := len(m.Kind)
		if !columns(n, len(m.Subject), len(m.Value)) {
			return m.Ack, dst, fmt.Errorf("%s decisions for batch %d: columns of unequal length", what, m.Ack)
		}
		for i := 0; i < n; i++ {
			dst = append(dst, decision(decisionRow{m.Kind[i], m.Subject[i], m.Value[i]}))
		}
		return m.Ack, dst, nil
	}
}

// Scheduling batches have columns of their own (seed 001's stripe times).

func putSchedEvents(m *pb.SchedEvents, seq uint64, es []core.SchedEvent) {
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

func getSchedEvents(m *pb.SchedEvents, dst []core.SchedEvent) (uint64, []core.SchedEvent, error) {
	n := len(m.Kind)
	if !columns(n, len(m.Peer), len(m.Sub), len(m.Last), len(m.Msg), len(m.Bytes), len(m.TimeNs)) {
		return m.Seq, dst, fmt.Errorf("sched events batch %d: columns of unequal length", m.Seq)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, core.SchedEvent{
			Kind: core.SchedEventKind(m.Kind[i]), Peer: m.Peer[i], Sub: m.Sub[i], Last: m.Last[i],
			Msg: m.Msg[i], Bytes: m.Bytes[i], Time: time.Duration(m.TimeNs[i]),
		})
	}
	return m.Seq, dst, nil
}

func putSchedDecisions(m *pb.SchedDecisions, ack uint64, ds []core.SchedDecision) {
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

func getSchedDecisions(m *pb.SchedDecisions, dst []core.SchedDecision) (uint64, []core.SchedDecision, error) {
	n := len(m.Kind)
	if !columns(n, len(m.Peer), len(m.Sub), len(m.Weight)) {
		return m.Ack, dst, fmt.Errorf("sched decisions for batch %d: columns of unequal length", m.Ack)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, core.SchedDecision{Kind: core.SchedDecisionKind(m.Kind[i]), Peer: m.Peer[i], Sub: m.Sub[i], Weight: m.Weight[i]})
	}
	return m.Ack, dst, nil
}
