package extoll

import (
	"encoding/binary"
	"fmt"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// The match header in the first packet of a train, little-endian:
//
//	 0 u8  version
//	 1 u8  frame type
//	 2 u16 flags
//	 4 u32 context
//	 8 i32 tag
//	12 u32 PSN
//	16 u32 length of the frame payload that follows
//	20 u32 zero
const (
	matchSize    = 24
	matchVersion = 1
)

// VELO tags of the BTL's packets.
const (
	tagFirst uint8 = 0 // the first packet of a frame: match header and data
	tagMore  uint8 = 1 // a continuation packet: data only
	tagDrop  uint8 = 2 // no payload: the sender dropped its connection to the receiver (Disconnect)
)

const flagsKnown = core.FlagBacklog | core.FlagLast

func encodeMatch(b []byte, h *core.Header, n int) {
	b[0] = matchVersion
	b[1] = byte(h.Type)
	binary.LittleEndian.PutUint16(b[2:], uint16(h.Flags))
	binary.LittleEndian.PutUint32(b[4:], h.Context)
	binary.LittleEndian.PutUint32(b[8:], uint32(h.Tag))
	binary.LittleEndian.PutUint32(b[12:], h.PSN)
	binary.LittleEndian.PutUint32(b[16:], uint32(n))
	binary.LittleEndian.PutUint32(b[20:], 0)
}

// decodeMatch parses and checks a match header; every field is checked.
func decodeMatch(b []byte, src int, maxLen int, h *core.Header) error {
	if len(b) < matchSize {
		return &core.FrameError{Peer: src, Field: "length", Value: uint64(len(b)), Reason: "first packet shorter than the match header"}
	}
	if b[0] != matchVersion {
		return &core.FrameError{Peer: src, Field: "version", Value: uint64(b[0]), Reason: fmt.Sprintf("want %d", matchVersion)}
	}
	t := core.FrameType(b[1])
	if !t.IsPML() && t < core.TypeBTLBase {
		return &core.FrameError{Peer: src, Field: "type", Value: uint64(t), Reason: "unknown frame type"}
	}
	fl := core.Flag(binary.LittleEndian.Uint16(b[2:]))
	if fl&^flagsKnown != 0 {
		return &core.FrameError{Peer: src, Field: "flags", Value: uint64(fl), Reason: "unknown flag bits"}
	}
	n := binary.LittleEndian.Uint32(b[16:])
	if uint64(n) > uint64(maxLen) {
		return &core.FrameError{Peer: src, Field: "length", Value: uint64(n), Reason: fmt.Sprintf("exceeds the %d-byte maximum", maxLen)}
	}
	if r := binary.LittleEndian.Uint32(b[20:]); r != 0 {
		return &core.FrameError{Peer: src, Field: "reserved", Value: uint64(r), Reason: "must be zero"}
	}
	*h = core.Header{
		Type: t, Flags: fl, Src: int32(src),
		Context: binary.LittleEndian.Uint32(b[4:]),
		Tag:     int32(binary.LittleEndian.Uint32(b[8:])),
		PSN:     binary.LittleEndian.Uint32(b[12:]),
		Length:  n,
	}
	return nil
}

// trainLen is the number of packets a frame of n payload bytes takes.
func trainLen(n int) int { return (matchSize + n + nic.MaxPayload - 1) / nic.MaxPayload }

// cut writes the train for header h and payload pre+data into pkts, which
// must hold trainLen(len(pre)+len(data)) slots, and returns it.
func cut(pkts []nic.Slot, h *core.Header, pre, data []byte) []nic.Slot {
	n := len(pre) + len(data)
	pkts = pkts[:trainLen(n)]
	var hdr [matchSize]byte
	encodeMatch(hdr[:], h, n)
	segs := [3][]byte{hdr[:], pre, data}
	seg, off := 0, 0
	for i := range pkts {
		area := pkts[i].Area()
		fill := 0
		for fill < nic.MaxPayload && seg < len(segs) {
			c := copy(area[fill:], segs[seg][off:])
			fill += c
			off += c
			if off == len(segs[seg]) {
				seg, off = seg+1, 0
			}
		}
		tag := tagMore
		if i == 0 {
			tag = tagFirst
		}
		pkts[i].SetHeader(fill, tag, false)
	}
	return pkts
}
