package pml

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Route is one module and the peers whose virtual channels it carries:
// what a rank reports once at start (Open MPI's btl_base_verbose, or
// mpirun --report-bindings for transports).
type Route struct {
	// Module is the module's name (core.Attrs.Name).
	Module string
	// Peers are the ranks it reaches, ascending.
	Peers []int
}

// Routes lists the communicator's modules, in the order they were given,
// with the peers each carries (a peer with several rails is under each),
// and the peers no module reaches. It makes the virtual channel to every
// rank that had none yet: a report for the start of small jobs, not for
// thousands of ranks.
func (c *Comm) Routes() (routes []Route, unreachable []int) {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	byMod := make(map[*module][]int, len(e.mods))
	for r := range e.size {
		p := e.chans.get(r)
		if len(p.subchannels()) == 0 {
			unreachable = append(unreachable, p.rank)
		}
		for _, s := range p.subchannels() {
			byMod[s.mod] = append(byMod[s.mod], p.rank)
		}
	}
	for _, m := range e.mods {
		routes = append(routes, Route{Module: m.attrs.Name, Peers: byMod[m]})
	}
	return routes, unreachable
}

// State is what a communicator is doing at one moment: its pending
// requests and the channels that have something in flight. A rank
// reports it when its job is stopped by a timeout or a signal (like
// mpirun --report-state-on-timeout).
type State struct {
	Rank, Size int
	// Busy says the engine's lock was held for all of State's wait: a
	// goroutine is inside the engine (a Progress call that does not
	// return, say); Requests and Peers are then empty.
	Busy bool
	// Aborted is the job's abort, if any.
	Aborted  error
	Requests []RequestState
	Peers    []PeerState
}

// RequestState describes one pending request.
type RequestState struct {
	// Kind is "send", "recv" or "operation" (a collective of a layer
	// above, named in Phase).
	Kind string
	// Peer is the destination, or the source (AnySource while a receive
	// from any source is unmatched).
	Peer, Tag int
	// Size is the message length when known, else the buffer's.
	Size int
	// Protocol is "eager", "rdma_read", "rdma_write", "rdma_read_async"
	// or "pipeline"; "" for an unmatched receive.
	Protocol string
	// Phase says where the protocol is ("posted, no matching message
	// yet", "START sent, waiting for the receiver's REPLY", ...).
	Phase string
	// Done is the bytes placed (receive) or handed over (send) so far.
	Done int
}

// PeerState is the channel to one peer, reported when it is not idle.
type PeerState struct {
	Rank int
	// PSN is the next sequence number this rank stamps toward the peer,
	// ESN the next one it expects from it; OutOfOrder frames wait for
	// the gap before them.
	PSN, ESN   uint32
	OutOfOrder int
	// Queued counts the subchannels holding frames or RDMA operations
	// that wait for a resource (credits, send buffers, read tokens).
	Queued int
	Lost   error
}

// State takes a snapshot of c's engine. It waits up to wait for the
// engine's lock (a rank blocked in Wait releases it between polls) and
// reports Busy if it never gets it. It is for reports, not the data
// path: it allocates.
func (c *Comm) State(wait time.Duration) State {
	e := c.e
	st := State{Rank: e.rank, Size: e.size}
	if p := e.abort.Load(); p != nil {
		st.Aborted = *p
	}
	for end := time.Now().Add(wait); !e.mu.TryLock(); {
		if time.Now().After(end) {
			st.Busy = true
			return st
		}
		time.Sleep(time.Millisecond)
	}
	defer e.mu.Unlock()
	if e.round != nil {
		// A blocking collective waits its rounds without an operation
		// request (WaitRound).
		st.Requests = append(st.Requests, RequestState{Kind: "operation", Peer: -1, Phase: e.round.String() + " in progress"})
	}
	for _, r := range e.reqs {
		if r.gen == 0 || r.done || r.released {
			continue
		}
		st.Requests = append(st.Requests, r.state())
	}
	for _, p := range e.chans.all() {
		ps := PeerState{Rank: p.rank, PSN: p.nextPSN(), ESN: p.expected(), OutOfOrder: p.waiting(), Lost: p.failed()}
		for _, s := range p.subchannels() {
			if !s.out.Empty() || !s.readQ.Empty() || !s.rdmaQ.Empty() {
				ps.Queued++
			}
		}
		if ps.OutOfOrder > 0 || ps.Queued > 0 || ps.Lost != nil {
			st.Peers = append(st.Peers, ps)
		}
	}
	return st
}

// state describes a pending request (lock held).
func (r *Request) state() RequestState {
	if r.kind == reqOp {
		// A collective's own messages are listed as sends and receives.
		what := fmt.Sprintf("%T", r.op)
		if s, ok := r.op.(fmt.Stringer); ok {
			what = s.String()
		}
		return RequestState{Kind: "operation", Peer: -1, Phase: what + " in progress"}
	}
	rs := RequestState{Kind: "send", Peer: r.peer, Tag: r.tag, Size: r.total, Done: r.got, Protocol: "eager"}
	if r.kind == reqRecv {
		rs.Kind = "recv"
		if !r.posted() {
			rs.Peer = r.src
		}
	}
	if rs.Size == 0 {
		rs.Size = len(r.buf)
	}
	if r.proto != 0 {
		rs.Protocol = r.proto.String()
	}
	inFlight := 0
	if r.x != nil {
		inFlight = r.x.stripes
	}
	switch {
	case r.posted():
		rs.Protocol, rs.Phase = "", "posted, no matching message yet"
	case inFlight > 0:
		rs.Phase = fmt.Sprintf("%d RDMA operations in flight", inFlight)
	case r.kind == reqSend && r.proto == 0:
		rs.Phase = "queued for a send resource or a credit"
	case r.kind == reqRecv && r.proto == 0:
		rs.Phase = "matched, the eager data not yet placed"
	case r.kind == reqSend && r.remote == 0 && (r.proto == ProtoWrite || r.proto == ProtoPipeline):
		rs.Phase = "START sent, waiting for the receiver's REPLY"
	case r.kind == reqSend && r.proto == ProtoPipeline:
		rs.Phase = "sending fragments"
	case r.kind == reqSend:
		rs.Phase = "waiting for the receiver's FIN"
	case r.proto == ProtoWrite:
		rs.Phase = "REPLY sent, waiting for the sender's data and FIN"
	case r.proto == ProtoPipeline:
		rs.Phase = "receiving fragments"
	default:
		rs.Phase = "waiting for the data"
	}
	return rs
}

// Report writes the state as the lines of a report, each prefixed with
// prefix.
func (s State) Report(w io.Writer, prefix string) {
	var b strings.Builder
	switch {
	case s.Busy:
		fmt.Fprintf(&b, "%sthe engine is busy: a goroutine held its lock throughout (inside a Progress call)\n", prefix)
	case len(s.Requests) == 0:
		fmt.Fprintf(&b, "%sno pending requests\n", prefix)
	default:
		fmt.Fprintf(&b, "%s%d pending requests:\n", prefix, len(s.Requests))
	}
	reqs := slices.Clone(s.Requests)
	slices.SortStableFunc(reqs, func(a, b RequestState) int { return strings.Compare(a.Kind, b.Kind) })
	for _, r := range reqs {
		if r.Kind == "operation" {
			fmt.Fprintf(&b, "%s  operation: %s\n", prefix, r.Phase)
			continue
		}
		who := fmt.Sprintf("to %d", r.Peer)
		if r.Kind == "recv" {
			who = fmt.Sprintf("from %d", r.Peer)
			if r.Peer == AnySource {
				who = "from any"
			}
		}
		tag := fmt.Sprint(r.Tag)
		if r.Tag == AnyTag {
			tag = "any"
		}
		proto := r.Protocol
		if proto != "" {
			proto += ", "
		}
		fmt.Fprintf(&b, "%s  %s %s tag %s, %d bytes (%d done): %s%s\n", prefix, r.Kind, who, tag, r.Size, r.Done, proto, r.Phase)
	}
	for _, p := range s.Peers {
		fmt.Fprintf(&b, "%s  peer %d: psn %d, esn %d, %d frames out of order, %d subchannels with queued work", prefix, p.Rank, p.PSN, p.ESN, p.OutOfOrder, p.Queued)
		if p.Lost != nil {
			fmt.Fprintf(&b, ", lost: %v", p.Lost)
		}
		b.WriteByte('\n')
	}
	if s.Aborted != nil {
		fmt.Fprintf(&b, "%s  the job was aborted: %v\n", prefix, s.Aborted)
	}
	io.WriteString(w, b.String())
}
