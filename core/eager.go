package core

// Eager is the eager fast path a BTL may offer: an endpoint that writes a
// plain EAGER frame straight into the peer's receive space and takes the
// peer's next frame from there in place, so that the PML's fused paths
// (pml/fast.go) move a small message without a Header passed by value, a
// handler call, a decoded header or a copy to an unexpected queue. sm
// offers it over its fast boxes; any transport whose frames from one peer
// arrive in order in memory the receiver reads in place could (a ring per
// link, as inproc's).
//
// The calls take fields of the frame header — context, tag, PSN, length —
// and decide nothing for the PML. TakeEager has the shape of libfabric's
// fi_trecv: a tag and an ignore mask, the filter every tag-matching
// transport applies (FI_TAGGED, UCX's tag offload), with the bits set in
// ignore left out of the comparison. Which receive a frame goes to, and
// what a wildcard means, stay the PML's: it turns its receive into a
// filter (AnyTag into IgnoreTag), and when the frame is not for that
// receive TakeEager shows its tag and length and leaves it, for the PML to
// match elsewhere or for Progress to deliver. A frame not taken stays
// where it is.
//
// Every call is serialized with the module's others, like Send and
// Progress, and keeps the pair's order with them: a frame SendEager wrote
// arrives after every frame Send sent before it, and TakeEager takes a
// frame only when it is the next the pair delivers. From inside Progress
// (a handler) TakeEager takes nothing, for Progress may be delivering
// that very frame; SendEager may be called there as Send may.
//
// Allocation-free and cheap per message are the point: a blocking receive
// or each receive of a window costs one TakeEager per message. (The set
// had PeekEager, which showed the tag and length, and a TakeEager that
// copied: a blocking receive crossed into the transport twice, 6 % more
// instructions a round trip.)
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
	// TakeEager looks at the next frame the peer sent this rank. When it
	// arrived by the direct way and is a plain EAGER frame (EagerMatch) on
	// context ctx with PSN psn, it returns the frame's tag and payload
	// length n, and takes it — copies the payload into buf and consumes
	// the frame, as Progress does once a handler returned — when its tag
	// passes the filter (TagPasses(htag, tag, ignore)) and buf holds it:
	// EagerTaken; otherwise the frame stays where it is: EagerKept.
	// EagerNone: nothing has arrived by the direct way, the next frame
	// comes another way (Progress delivers it), the peer is lost, or the
	// call comes from a handler: look again later. EagerOther: the next
	// frame is of another type, context or PSN; Progress delivers it.
	TakeEager(ctx, psn uint32, tag int32, ignore uint32, buf []byte) (htag int32, n int, res EagerResult)
}

// IgnoreTag is the ignore mask of a filter that passes every tag.
const IgnoreTag = ^uint32(0)

// TagPasses reports whether a frame's tag htag passes the filter of tag
// and ignore: equal on every bit not set in ignore, as libfabric's
// FI_TAGGED compares (tag | ignore) == (htag | ignore).
func TagPasses(htag, tag int32, ignore uint32) bool { return uint32(htag^tag)&^ignore == 0 }

// EagerResult is what TakeEager found.
type EagerResult uint8

// The results of TakeEager.
const (
	// EagerNone: nothing by the direct way; look again later.
	EagerNone EagerResult = iota
	// EagerTaken: the payload is in buf and the frame consumed.
	EagerTaken
	// EagerKept: the next frame is the in-order EAGER frame asked for,
	// but its tag did not pass the filter or buf is too short: it stays.
	EagerKept
	// EagerOther: the next frame is another one; Progress delivers it.
	EagerOther
)
