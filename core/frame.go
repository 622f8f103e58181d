package core

import (
	"encoding/binary"
	"fmt"
)

// HeaderVersion is the version of the frame header layout below. A frame
// with any other version is rejected.
const HeaderVersion = 1

// HeaderSize is the size in bytes of an encoded Header.
const HeaderSize = 32

// The frame header, one fixed little-endian layout for every BTL:
//
//	offset size field
//	 0      1   version   HeaderVersion
//	 1      1   type      FrameType
//	 2      2   flags     Flag bits; unknown bits are an error
//	 4      4   src       source rank
//	 8      4   context   communicator context id
//	12      4   tag       message tag (int32)
//	16      4   psn       packet sequence number of the virtual channel
//	20      4   length    payload bytes that follow the header
//	24      2   credits   piggybacked flow-control credits
//	26      6   reserved  zero
const (
	offVersion = 0
	offType    = 1
	offFlags   = 2
	offSrc     = 4
	offContext = 8
	offTag     = 12
	offPSN     = 16
	offLength  = 20
	offCredits = 24
	offRsvd    = 26
)

// FrameType says what a frame carries. Types below TypeBTLBase belong to
// the PML; [TypeBTLBase, TypeUserBase) to transports for their own control
// traffic (explicit credits and the like), never delivered upward;
// [TypeUserBase, 255] to extensions and tests.
type FrameType uint8

// Frame types of the PML protocols (seed 004 §3–4, seed 001 §5).
const (
	// TypeEager carries a whole message: match fields plus data.
	TypeEager FrameType = 1 + iota
	// TypeRndvStart is RNDZ_START: match fields, the total length, the
	// sender's request, memory keys for rdma_read, and optional inline data.
	TypeRndvStart
	// TypeRndvReply is RNDZ_REPLY (rdma_write: the receiver's keys) or the
	// ACK of the send-based pipeline.
	TypeRndvReply
	// TypeRndvFin is FIN: rendezvous data is in place.
	TypeRndvFin
	// TypeFrag carries one fragment of a message by the send-based
	// copy-in/copy-out pipeline.
	TypeFrag
	typePMLEnd
)

// Ranges of frame types outside the PML's.
const (
	// TypeBTLBase is the first type a transport may use privately.
	TypeBTLBase FrameType = 64
	// TypeCredit is an explicit credit message (seed 000 §4.2).
	TypeCredit FrameType = TypeBTLBase
	// TypeUserBase is the first type left to extensions and tests.
	TypeUserBase FrameType = 128
)

// IsPML reports whether t is one of the PML's protocol types.
func (t FrameType) IsPML() bool { return t >= TypeEager && t < typePMLEnd }

var frameTypeNames = map[FrameType]string{
	TypeEager: "EAGER", TypeRndvStart: "RNDV_START", TypeRndvReply: "RNDV_REPLY",
	TypeRndvFin: "RNDV_FIN", TypeFrag: "FRAG", TypeCredit: "CREDIT",
}

func (t FrameType) String() string {
	if s, ok := frameTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Flag bits of the header.
type Flag uint16

const (
	// FlagBacklog marks a frame that waited in the sender's backlog queue
	// for credits: the "went through backlog" bit of seed 000 §4.3 that
	// tells the receiver to post more buffers for this peer.
	FlagBacklog Flag = 1 << iota
	// FlagLast marks the last frame of a fragmented message.
	FlagLast
	flagsKnown = FlagBacklog | FlagLast
)

// Header is the decoded frame header. The PML fills the match fields; the
// BTL owns Credits and FlagBacklog, which it sets as the frame leaves.
type Header struct {
	Type    FrameType
	Flags   Flag
	Src     int32
	Context uint32
	Tag     int32
	PSN     uint32
	Length  uint32
	Credits uint16
}

// Encode writes h into b, which must hold HeaderSize bytes.
func (h *Header) Encode(b []byte) { PutWords(b, h.Words()) }

// Words returns h as the four little-endian 64-bit words of its layout,
// for a transport that stores them straight into shared memory (four
// stores instead of ten) with PutWords.
func (h *Header) Words() [4]uint64 {
	return [4]uint64{
		HeaderVersion | uint64(h.Type)<<8 | uint64(h.Flags)<<16 | uint64(uint32(h.Src))<<32,
		uint64(h.Context) | uint64(uint32(h.Tag))<<32,
		uint64(h.PSN) | uint64(h.Length)<<32,
		uint64(h.Credits),
	}
}

// EagerWords returns the Words of Header{Type: TypeEager, Src: src,
// Context: ctx, Tag: tag, PSN: psn, Length: n} — no flags, no credits —
// without a Header built: a transport's direct eager path (Eager.SendEager).
// EagerMatch reads them back.
func EagerWords(src int32, ctx uint32, tag int32, psn uint32, n int) [4]uint64 {
	return [4]uint64{
		HeaderVersion | uint64(TypeEager)<<8 | uint64(uint32(src))<<32,
		uint64(ctx) | uint64(uint32(tag))<<32,
		uint64(psn) | uint64(uint32(n))<<32,
		0,
	}
}

// PutEagerHeader writes the header EagerWords describes into h, four
// stores without the words passed through memory as an array (a
// transport's direct eager path, Eager.SendEager).
func PutEagerHeader(h *[HeaderSize]byte, src int32, ctx uint32, tag int32, psn uint32, n int) {
	binary.LittleEndian.PutUint64(h[0:], HeaderVersion|uint64(TypeEager)<<8|uint64(uint32(src))<<32)
	binary.LittleEndian.PutUint64(h[offContext:], uint64(ctx)|uint64(uint32(tag))<<32)
	binary.LittleEndian.PutUint64(h[offPSN:], uint64(psn)|uint64(uint32(n))<<32)
	binary.LittleEndian.PutUint64(h[offCredits:], 0)
}

// PutWords writes a header's words into b, which must hold HeaderSize
// bytes.
func PutWords(b []byte, w [4]uint64) {
	_ = b[HeaderSize-1]
	binary.LittleEndian.PutUint64(b, w[0])
	binary.LittleEndian.PutUint64(b[8:], w[1])
	binary.LittleEndian.PutUint64(b[16:], w[2])
	binary.LittleEndian.PutUint64(b[24:], w[3])
}

// EagerMatch reports whether h, the header of a frame of frameLen bytes,
// is a plain EAGER frame from src on context ctx with PSN psn — version,
// type, source, no flags, no credits, zero reserved bytes and a payload
// of n bytes within the frame — checked on four words instead of a
// decoded Header, and returns its tag and n (meaningless when ok is
// false). The caller leaves any other frame to Decode and the handlers,
// which name what is wrong with a bad one. EagerWords and PutEagerHeader
// write what it reads.
func EagerMatch(h *[HeaderSize]byte, src int32, ctx, psn uint32, frameLen int) (tag int32, n int, ok bool) {
	w0 := binary.LittleEndian.Uint64(h[0:])
	w1 := binary.LittleEndian.Uint64(h[offContext:])
	w2 := binary.LittleEndian.Uint64(h[offPSN:])
	w3 := binary.LittleEndian.Uint64(h[offCredits:])
	n = int(w2 >> 32)
	ok = w0 == HeaderVersion|uint64(TypeEager)<<8|uint64(uint32(src))<<32 && uint32(w1) == ctx && uint32(w2) == psn &&
		w3 == 0 && n <= frameLen-HeaderSize
	return int32(w1 >> 32), n, ok
}

// FrameLimits bound what Decode accepts.
type FrameLimits struct {
	// Size is the number of ranks in the job; Src must be below it.
	Size int
	// MaxPayload bounds Length; 0 means only the buffer bounds it.
	MaxPayload int
}

// Decode parses and checks the header at the start of frame, which holds
// the header and its payload (possibly followed by slack). Every field is
// checked: a bad frame yields a *FrameError naming the field, never a
// panic and never a partially filled header that could be delivered.
func (h *Header) Decode(frame []byte, lim FrameLimits) error {
	// Every frame on the data path is good: check all fields at once on
	// four words, and name the bad field only when that fails.
	if len(frame) >= HeaderSize {
		w0 := binary.LittleEndian.Uint64(frame)
		w2 := binary.LittleEndian.Uint64(frame[offPSN:])
		w3 := binary.LittleEndian.Uint64(frame[offCredits:])
		t, flags := FrameType(w0>>8), Flag(w0>>16)
		src, n := uint32(w0>>32), uint32(w2>>32)
		if byte(w0) == HeaderVersion && t != 0 && (t < typePMLEnd || t >= TypeBTLBase) && flags&^flagsKnown == 0 &&
			(lim.Size <= 0 || int64(src) < int64(lim.Size)) && uint64(n) <= uint64(len(frame)-HeaderSize) &&
			(lim.MaxPayload <= 0 || uint64(n) <= uint64(lim.MaxPayload)) && w3>>16 == 0 {
			w1 := binary.LittleEndian.Uint64(frame[offContext:])
			*h = Header{Type: t, Flags: flags, Src: int32(src), Context: uint32(w1), Tag: int32(w1 >> 32),
				PSN: uint32(w2), Length: n, Credits: uint16(w3)}
			return nil
		}
	}
	return h.decodeSlow(frame, lim)
}

// decodeSlow is Decode field by field, for the frame that failed the
// combined check: it names the first bad field.
func (h *Header) decodeSlow(frame []byte, lim FrameLimits) error {
	if len(frame) < HeaderSize {
		return &FrameError{Peer: -1, Field: "length", Value: uint64(len(frame)), Reason: fmt.Sprintf("frame shorter than the %d-byte header", HeaderSize)}
	}
	src := binary.LittleEndian.Uint32(frame[offSrc:])
	peer := -1
	if lim.Size <= 0 || int64(src) < int64(lim.Size) {
		peer = int(src)
	}
	if v := frame[offVersion]; v != HeaderVersion {
		return &FrameError{Peer: peer, Field: "version", Value: uint64(v), Reason: fmt.Sprintf("want %d", HeaderVersion)}
	}
	t := FrameType(frame[offType])
	if t == 0 || (t >= typePMLEnd && t < TypeBTLBase) {
		return &FrameError{Peer: peer, Field: "type", Value: uint64(t), Reason: "unknown frame type"}
	}
	if lim.Size > 0 && int64(src) >= int64(lim.Size) {
		return &FrameError{Peer: -1, Field: "src", Value: uint64(src), Reason: fmt.Sprintf("job has %d ranks", lim.Size)}
	}
	flags := Flag(binary.LittleEndian.Uint16(frame[offFlags:]))
	if flags&^flagsKnown != 0 {
		return &FrameError{Peer: peer, Field: "flags", Value: uint64(flags), Reason: "unknown flag bits"}
	}
	n := binary.LittleEndian.Uint32(frame[offLength:])
	if uint64(n) > uint64(len(frame)-HeaderSize) {
		return &FrameError{Peer: peer, Field: "length", Value: uint64(n), Reason: fmt.Sprintf("only %d payload bytes present", len(frame)-HeaderSize)}
	}
	if lim.MaxPayload > 0 && uint64(n) > uint64(lim.MaxPayload) {
		return &FrameError{Peer: peer, Field: "length", Value: uint64(n), Reason: fmt.Sprintf("exceeds the %d-byte maximum", lim.MaxPayload)}
	}
	if r := uint64(binary.LittleEndian.Uint16(frame[offRsvd:])) | uint64(binary.LittleEndian.Uint32(frame[offRsvd+2:]))<<16; r != 0 {
		return &FrameError{Peer: peer, Field: "reserved", Value: r, Reason: "must be zero"}
	}
	*h = Header{
		Type:    t,
		Flags:   flags,
		Src:     int32(src),
		Context: binary.LittleEndian.Uint32(frame[offContext:]),
		Tag:     int32(binary.LittleEndian.Uint32(frame[offTag:])),
		PSN:     binary.LittleEndian.Uint32(frame[offPSN:]),
		Length:  n,
		Credits: binary.LittleEndian.Uint16(frame[offCredits:]),
	}
	return nil
}

// Handler receives a frame delivered by a module's Progress. h and payload
// are valid only during the call; a handler that keeps data copies it.
// Handlers may call Send and RDMA operations on any module.
type Handler func(h *Header, payload []byte)

// Handlers is a dispatch table by frame type that modules embed to
// implement Register.
type Handlers [256]Handler

// Register installs fn for t. Registering a type twice is an error.
func (hs *Handlers) Register(t FrameType, fn Handler) error {
	if t == 0 || (t >= typePMLEnd && t < TypeBTLBase) {
		return fmt.Errorf("register handler: %v is not a valid frame type", t)
	}
	if hs[t] != nil {
		return fmt.Errorf("register handler: %v already has a handler", t)
	}
	hs[t] = fn
	return nil
}

// Dispatch hands a decoded frame to its handler. A type nobody registered
// is a bad frame: the caller counts it and fails the connection.
func (hs *Handlers) Dispatch(h *Header, payload []byte) error {
	fn := hs[h.Type]
	if fn == nil {
		return &FrameError{Peer: int(h.Src), Field: "type", Value: uint64(h.Type), Reason: "no handler registered"}
	}
	fn(h, payload)
	return nil
}
