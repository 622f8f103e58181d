package pml

import (
	"encoding/binary"
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// Payload layouts of the PML's control frames. All little-endian; every
// decoder checks lengths and counts and returns a *core.FrameError.
//
// RNDV_START (after the header):
//
//	 0 u64 total message length
//	 8 u64 sender request id
//	16 u8  protocol
//	17 u8  number of keys k
//	18 u16 zero
//	20 u32 inline data length m
//	24 k × key entry (40 bytes: u8 subchannel, 7 zero, 32-byte MemKey)
//	.. m bytes of inline data
//
// RNDV_REPLY:
//
//	 0 u64 sender request id
//	 8 u64 receiver request id
//	16 u64 bytes the receiver accepts (its buffer may be smaller)
//	24 u8  number of keys k, 7 zero
//	32 k × key entry
//
// RNDV_FIN:
//
//	 0 u64 request id at the frame's destination
//	 8 u64 bytes placed (rdma_write: by this subchannel)
//	16 u32 status (finOK, finFailed)
//	20 u32 zero
//
// FRAG:
//
//	 0 u64 receiver request id
//	 8 u64 offset of the data in the message
//	16 .. data
const (
	startFixed = 24
	replyFixed = 32
	finSize    = 24
	fragFixed  = 16
	keyEntry   = 8 + core.MemKeySize
)

// maxSubchannels bounds the subchannels of one virtual channel.
const maxSubchannels = 8

// Protocol is how a message too large for eager moves (seed 004).
type Protocol uint8

const (
	// ProtoRead: RNDZ_START carries keys, the receiver reads, then FIN.
	ProtoRead Protocol = iota + 1
	// ProtoWrite: START, REPLY with the receiver's keys, RDMA write, FIN.
	ProtoWrite
	// ProtoReadAsync: ProtoRead with an event-driven progress goroutine
	// woken by solicited events while receives are pending (seed 004 §4.3).
	ProtoReadAsync
	// ProtoPipeline: START, ACK, then the data in send fragments through
	// bounce buffers (copy-in/copy-out) — for BTLs without put/get.
	ProtoPipeline
	protoEnd
)

func (p Protocol) String() string {
	switch p {
	case ProtoRead:
		return "rdma_read"
	case ProtoWrite:
		return "rdma_write"
	case ProtoReadAsync:
		return "rdma_read_async"
	case ProtoPipeline:
		return "pipeline"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ParseProtocol parses a protocol name as written in HCL.
func ParseProtocol(s string) (Protocol, error) {
	for p := ProtoRead; p < protoEnd; p++ {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown protocol %q (want rdma_read, rdma_write, rdma_read_async or pipeline)", s)
}

// FIN status codes.
const (
	finOK     = 0
	finFailed = 1
)

type keyRef struct {
	sub int
	key core.MemKey
}

// startChoose, in a RNDV_START's flags, offers the receiver the pipeline
// instead of the rdma_read the START names (core.MechRule.Choose): it may
// answer with a RNDV_REPLY without keys, and the sender pumps.
const startChoose = 1

type startMsg struct {
	total   uint64
	sreq    uint64
	proto   Protocol
	choose  bool // startChoose
	nkeys   int
	keys    [maxSubchannels]keyRef
	inline  []byte
	rawKeys []byte
}

func badFrame(src int32, field string, v uint64, why string) error {
	return &core.FrameError{Peer: int(src), Field: field, Value: v, Reason: why}
}

func decodeKeys(src int32, b []byte, n int, out *[maxSubchannels]keyRef) error {
	if n > maxSubchannels {
		return badFrame(src, "keys", uint64(n), fmt.Sprintf("at most %d", maxSubchannels))
	}
	if len(b) < n*keyEntry {
		return badFrame(src, "keys", uint64(n), "payload too short for the keys")
	}
	for i := 0; i < n; i++ {
		e := b[i*keyEntry:]
		out[i].sub = int(e[0])
		if out[i].sub >= maxSubchannels {
			return badFrame(src, "key.subchannel", uint64(e[0]), "no such subchannel")
		}
		out[i].key, _ = core.DecodeMemKey(e[8:keyEntry])
	}
	return nil
}

func encodeKeys(b []byte, keys []keyRef) int {
	for i, k := range keys {
		e := b[i*keyEntry:]
		e[0] = byte(k.sub)
		clear(e[1:8])
		k.key.Encode(e[8:keyEntry])
	}
	return len(keys) * keyEntry
}

func (m *startMsg) decode(src int32, p []byte) error {
	if len(p) < startFixed {
		return badFrame(src, "start.length", uint64(len(p)), "shorter than a RNDV_START")
	}
	m.total = binary.LittleEndian.Uint64(p[0:])
	m.sreq = binary.LittleEndian.Uint64(p[8:])
	m.proto = Protocol(p[16])
	m.nkeys = int(p[17])
	m.choose = p[18]&startChoose != 0
	inl := binary.LittleEndian.Uint32(p[20:])
	if m.proto == 0 || m.proto >= protoEnd {
		return badFrame(src, "start.protocol", uint64(p[16]), "unknown protocol")
	}
	if err := decodeKeys(src, p[startFixed:], m.nkeys, &m.keys); err != nil {
		return err
	}
	off := startFixed + m.nkeys*keyEntry
	if uint64(len(p)-off) != uint64(inl) || uint64(inl) > m.total {
		return badFrame(src, "start.inline", uint64(inl), "inline length does not match the payload or the message")
	}
	m.inline = p[off:]
	return nil
}

func encodeStart(b []byte, total, sreq uint64, proto Protocol, keys []keyRef, inline int, flags byte) int {
	binary.LittleEndian.PutUint64(b[0:], total)
	binary.LittleEndian.PutUint64(b[8:], sreq)
	b[16] = byte(proto)
	b[17] = byte(len(keys))
	b[18], b[19] = flags, 0
	binary.LittleEndian.PutUint32(b[20:], uint32(inline))
	return startFixed + encodeKeys(b[startFixed:], keys)
}

type replyMsg struct {
	sreq, rreq uint64
	accept     uint64
	nkeys      int
	keys       [maxSubchannels]keyRef
}

func (m *replyMsg) decode(src int32, p []byte) error {
	if len(p) < replyFixed {
		return badFrame(src, "reply.length", uint64(len(p)), "shorter than a RNDV_REPLY")
	}
	m.sreq = binary.LittleEndian.Uint64(p[0:])
	m.rreq = binary.LittleEndian.Uint64(p[8:])
	m.accept = binary.LittleEndian.Uint64(p[16:])
	m.nkeys = int(p[24])
	if err := decodeKeys(src, p[replyFixed:], m.nkeys, &m.keys); err != nil {
		return err
	}
	if len(p) != replyFixed+m.nkeys*keyEntry {
		return badFrame(src, "reply.length", uint64(len(p)), "trailing bytes")
	}
	return nil
}

func encodeReply(b []byte, sreq, rreq, accept uint64, keys []keyRef) int {
	binary.LittleEndian.PutUint64(b[0:], sreq)
	binary.LittleEndian.PutUint64(b[8:], rreq)
	binary.LittleEndian.PutUint64(b[16:], accept)
	b[24] = byte(len(keys))
	clear(b[25:32])
	return replyFixed + encodeKeys(b[replyFixed:], keys)
}

type finMsg struct {
	req    uint64
	bytes  uint64
	status uint32
}

func (m *finMsg) decode(src int32, p []byte) error {
	if len(p) != finSize {
		return badFrame(src, "fin.length", uint64(len(p)), fmt.Sprintf("want %d", finSize))
	}
	m.req = binary.LittleEndian.Uint64(p[0:])
	m.bytes = binary.LittleEndian.Uint64(p[8:])
	m.status = binary.LittleEndian.Uint32(p[16:])
	if m.status > finFailed {
		return badFrame(src, "fin.status", uint64(m.status), "unknown status")
	}
	return nil
}

func encodeFin(b []byte, req, bytes uint64, status uint32) int {
	binary.LittleEndian.PutUint64(b[0:], req)
	binary.LittleEndian.PutUint64(b[8:], bytes)
	binary.LittleEndian.PutUint32(b[16:], status)
	binary.LittleEndian.PutUint32(b[20:], 0)
	return finSize
}

func encodeFragHdr(b []byte, rreq, off uint64) int {
	binary.LittleEndian.PutUint64(b[0:], rreq)
	binary.LittleEndian.PutUint64(b[8:], off)
	return fragFixed
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
