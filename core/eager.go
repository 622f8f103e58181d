package core

// Eager is the eager fast path a BTL may offer: an endpoint that writes a
// plain EAGER frame straight into the peer's receive space and shows the
// peer's next frame in place, so that the PML's fused paths (pml/fast.go)
// move a small message without a Header passed by value, a handler call,
// a decoded header or a copy to an unexpected queue. sm offers it over
// its fast boxes; any transport whose frames from one peer arrive in
// order in memory the receiver reads in place could (a ring per link, as
// inproc's).
//
// The calls take and return fields of the frame header — context, tag,
// PSN, length — and decide nothing for the PML: PeekEager says what the
// next frame is; the PML matches it (its tag against a posted receive's,
// a wildcard, whether the receive's buffer holds it) and, when a receive
// takes it, TakeEager copies it there. A frame the PML does not take stays
// where it is, for Progress to deliver.
//
// Every call is serialized with the module's others, like Send and
// Progress, and keeps the pair's order with them: a frame SendEager wrote
// arrives after every frame Send sent before it, and PeekEager shows a
// frame only when it is the next the pair delivers. From inside Progress
// (a handler) PeekEager and TakeEager find nothing, for Progress may be
// delivering that very frame; SendEager may be called there as Send may.
//
// Allocation-free and cheap per message are the point: the PML's window
// of receives costs one TakeEager per message (it also looks at the next
// frame), a blocking receive a PeekEager and a TakeEager. (RecvEager,
// which this replaces, took a receive's tag, wildcard and buffer and
// decided in the transport: one call for a blocking receive, the PML's
// matching in every transport that offers the set.)
type Eager interface {
	// SendEager sends data from this rank as the EAGER frame on context
	// ctx with tag and psn, no flags — the frame Send would send with that
	// header — if it can at once by its direct way. It reports false,
	// having sent nothing, when it cannot: too long for the direct way, no
	// room there, a lost peer, a connection not yet set up, flow control
	// that would hold the frame or rather see it go by rendezvous
	// (Resources.PreferRendezvous). The caller then sends the frame with
	// Send, which keeps the pair's order.
	SendEager(ctx uint32, tag int32, psn uint32, data []byte) bool
	// PeekEager looks at the next frame the peer sent this rank.
	// EagerFound: it arrived by the direct way and is a plain EAGER frame
	// (EagerMatch) on context ctx with PSN psn; tag is its tag and n its
	// payload length, and it stays in place until TakeEager or Progress
	// takes it. EagerNone: nothing has arrived by the direct way, the next
	// frame comes another way (Progress delivers it), the peer is lost, or
	// the call comes from a handler: look again later. EagerOther: the
	// next frame is of another type, context or PSN; Progress delivers it.
	PeekEager(ctx, psn uint32) (tag int32, n int, res EagerResult)
	// TakeEager copies the payload of the frame the last PeekEager or
	// TakeEager found into buf, which must hold it (n bytes), consumes the
	// frame as Progress does once a handler returned, and looks at the
	// next frame as PeekEager would, on the same context with the next
	// PSN. When the frame found is no longer there to take — Progress
	// delivered it, the peer was lost, nothing was found, the call comes
	// from a handler — it takes nothing and returns EagerNone.
	TakeEager(buf []byte) (tag int32, n int, res EagerResult)
}

// EagerResult is what PeekEager and TakeEager found next.
type EagerResult uint8

// The results of PeekEager and TakeEager.
const (
	// EagerNone: nothing by the direct way; look again later.
	EagerNone EagerResult = iota
	// EagerFound: the next frame is the in-order EAGER frame asked for;
	// its tag and length are returned, and TakeEager takes it.
	EagerFound
	// EagerOther: the next frame is another one; Progress delivers it.
	EagerOther
)
