package softrc

import (
	"encoding/binary"
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// The wire between two softrc ports is one TCP stream per port pair (a
// "link"). Every packet starts with a fixed 40-byte little-endian header;
// QPs are multiplexed over the link by destination QP number, as packets of
// many QPs share one physical InfiniBand link.
//
// A link carries QP traffic only once both ends have proved they belong
// to the job (auth.go): the dialer's HELLO, the acceptor's CHALLENGE and
// the dialer's PROOF come first, and anything else before them gets the
// link rejected.
//
//	offset size field
//	 0      1   op        packet opcode
//	 1      1   flags     pkt* bits
//	 2      1   syndrome  NAK kind (bits 0-2), RNR timer code (bits 3-7)
//	 3      1   version   wireVersion
//	 4      4   dqpn      destination QP number
//	 8      4   sqpn      source QP number
//	12      4   psn       packet sequence number (ACK/NAK: the PSN acked)
//	16      4   ack       piggybacked ACK PSN (valid with pktAckValid)
//	20      4   len       payload bytes that follow the header
//	24      4   aux       immediate data; READ_REQ: bytes to read
//	28      4   key       rkey (RDMA) or qkey (UD)
//	32      8   raddr     remote virtual address (RDMA)
const (
	hdrSize     = 40
	wireVersion = 2 // 2: links authenticate (HELLO, CHALLENGE, PROOF)
)

// Packet opcodes.
const (
	opHello     = 1 // first packet on a link: the dialer's port address and nonce
	opSend      = 2
	opSendImm   = 3
	opWrite     = 4
	opWriteImm  = 5
	opReadReq   = 6
	opReadResp  = 7
	opAck       = 8
	opNak       = 9
	opUD        = 10
	opUDImm     = 11
	opChallenge = 12 // the acceptor's nonce and proof
	opProof     = 13 // the dialer's proof
	opMax       = 14
)

// Packet flags.
const (
	pktSolicited = 1 << iota // raise a solicited event at the responder
	pktAckReq                // responder should acknowledge now
	pktAckValid              // the ack field carries a piggybacked ACK
)

// NAK syndromes.
const (
	nakRNR       = 1 // receiver not ready; the code is in the next byte
	nakInvReq    = 2 // invalid request (too long, too many reads)
	nakRemAccess = 3 // key, range or access flag violation
	nakRemOp     = 4 // the responder could not carry it out
)

// Handshake payloads: HELLO is the dialer's port address, GID (16) and
// LID (2), and its nonce; CHALLENGE the acceptor's nonce and proof; PROOF
// the dialer's proof.
const (
	addrSize      = 18
	helloSize     = addrSize + core.NonceSize
	challengeSize = core.NonceSize + core.ProofSize
	proofSize     = core.ProofSize
)

// maxPayload bounds one packet's payload: an InfiniBand message is at most
// 2^31 bytes.
const maxPayload = 1 << 31

type header struct {
	op       uint8
	flags    uint8
	syndrome uint8 // NAK kind (low 3 bits of byte 2)
	rnrCode  uint8 // RNR timer code of an RNR NAK (high 5 bits of byte 2)
	dqpn     uint32
	sqpn     uint32
	psn      uint32
	ack      uint32
	length   uint32
	aux      uint32
	key      uint32
	raddr    uint64
}

// encode writes h into b[:hdrSize]. An RNR NAK carries its timer code in
// the syndrome's high bits (syndrome nakRNR | code<<3).
func (h *header) encode(b []byte) {
	_ = b[hdrSize-1]
	b[0] = h.op
	b[1] = h.flags
	b[2] = h.syndrome | h.rnrCode<<3
	b[3] = wireVersion
	binary.LittleEndian.PutUint32(b[4:], h.dqpn)
	binary.LittleEndian.PutUint32(b[8:], h.sqpn)
	binary.LittleEndian.PutUint32(b[12:], h.psn)
	binary.LittleEndian.PutUint32(b[16:], h.ack)
	binary.LittleEndian.PutUint32(b[20:], h.length)
	binary.LittleEndian.PutUint32(b[24:], h.aux)
	binary.LittleEndian.PutUint32(b[28:], h.key)
	binary.LittleEndian.PutUint64(b[32:], h.raddr)
}

// decode parses b[:hdrSize]; a malformed header fails the link.
func (h *header) decode(b []byte) error {
	_ = b[hdrSize-1]
	if b[3] != wireVersion {
		return fmt.Errorf("wire version %d, want %d", b[3], wireVersion)
	}
	if b[0] == 0 || b[0] >= opMax {
		return fmt.Errorf("unknown opcode %d", b[0])
	}
	*h = header{
		op:       b[0],
		flags:    b[1],
		syndrome: b[2] & 7,
		rnrCode:  b[2] >> 3,
		dqpn:     binary.LittleEndian.Uint32(b[4:]),
		sqpn:     binary.LittleEndian.Uint32(b[8:]),
		psn:      binary.LittleEndian.Uint32(b[12:]),
		ack:      binary.LittleEndian.Uint32(b[16:]),
		length:   binary.LittleEndian.Uint32(b[20:]),
		aux:      binary.LittleEndian.Uint32(b[24:]),
		key:      binary.LittleEndian.Uint32(b[28:]),
		raddr:    binary.LittleEndian.Uint64(b[32:]),
	}
	if h.length >= maxPayload {
		return fmt.Errorf("payload length %d exceeds 2^31", h.length)
	}
	switch h.op {
	case opAck, opNak, opReadReq:
		if h.length != 0 {
			return fmt.Errorf("opcode %d carries %d payload bytes", h.op, h.length)
		}
	case opHello, opChallenge, opProof:
		if want := handshakeSize[h.op]; h.length != want {
			return fmt.Errorf("handshake packet %d of %d bytes, want %d", h.op, h.length, want)
		}
	}
	return nil
}

var handshakeSize = [opMax]uint32{opHello: helloSize, opChallenge: challengeSize, opProof: proofSize}

// psnBefore reports whether PSN a comes before b in the 32-bit sequence
// space (serial-number arithmetic).
func psnBefore(a, b uint32) bool { return int32(a-b) < 0 }
