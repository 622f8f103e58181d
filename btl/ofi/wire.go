package ofi

import (
	"encoding/binary"
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// What travels on an ofi endpoint besides the frames' bytes.
//
// The 64-bit libfabric tag of every tagged message says which receive
// class it is for: the low byte is the class's tag, a tagged class's
// index in the receive layout (the first class is untagged), or tagCtl,
// 0, for the control class. Receives are posted with every bit above the
// class ignored, so tags choose buffers by size as B-SRQ's QPs do (seed 002
// §3). The class bytes no class uses are covered by sink receives
// (queues.go), so that no tagged message waits unmatched in the
// provider. tagNoCredit is set on the receiving side only, from the CQ
// data's no-credit bit.
//
// The 64-bit remote CQ data of every message is the session token of the
// sender's direction (auth.go), the no-credit bit (a frame that spent no
// credit, core.SendNoFlowControl) and a sequence number (cqData): zero on
// the handshake's own messages, which prove themselves, and the token
// the handshake derived on everything else. A message whose token is not
// the one its claimed sender's session holds is dropped before its
// header is decoded.
const (
	tagClassMask = 0xff
	tagNoCredit  = 1 << 8
	// tagIgnore is the ignore mask of every posted receive: the class
	// must match, the rest is the sender's.
	tagIgnore = ^uint64(tagClassMask)
	// classCtl is the class of control messages: the handshake, explicit
	// credits, probes and goodbyes. Its tag is tagCtl: the class tags in
	// use are then 0 up to the layout's length, and the sinks cover the
	// rest of the class byte in a few blocks (sinkBlocks).
	classCtl = 0xff
	tagCtl   = 0
	// classSink is the class index of the sink receives.
	classSink = 0xfe
	// maxClasses bounds the receive layout's queues.
	maxClasses = 16
)

// Control messages, each in one ctl buffer:
//
//	0  4  magic "GOFI"
//	4  1  op
//	5  1  version (1)
//	6  2  zero
//	8  4  sender's rank
//	12 .. the op's body
//
//	hello     counter[8] Nd[16] proof[32]   opens a session (auth.go)
//	credit    n[1] pad[3] credits[n]u16     session: credits per class
//	probe     -                             session: are you there
//	bye       seq[4]                        session: I close after frame seq-1
//	drop      -                             session: I dropped you (Disconnect)
const (
	ctlMagic   = 0x49464f47 // "GOFI" little-endian
	ctlVersion = 1
	ctlHdr     = 12
	ctlBufSize = 256
)

type ctlOp uint8

const (
	opHello ctlOp = iota + 1
	opCredit
	opProbe
	opBye
	opDrop
)

var ctlOpNames = [...]string{opHello: "hello", opCredit: "credit", opProbe: "probe", opBye: "bye", opDrop: "drop"}

func (o ctlOp) String() string {
	if int(o) < len(ctlOpNames) && ctlOpNames[o] != "" {
		return ctlOpNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ctlMsg is a decoded control message.
type ctlMsg struct {
	op      ctlOp
	rank    int
	counter uint64
	nd      [16]byte
	proof   [32]byte
	credits [maxClasses]uint16 // opCredit: per class
	nclass  int                // opCredit: classes in credits
	seq     uint16             // opBye: the sequence number after the last frame
}

// Body sizes of the ops.
const (
	helloLen  = ctlHdr + 8 + 16 + 32
	byeLen    = ctlHdr + 4
	creditHdr = ctlHdr + 4
)

// putCtl writes the common header of op from rank into b.
func putCtl(b []byte, op ctlOp, rank int) {
	binary.LittleEndian.PutUint32(b[0:], ctlMagic)
	b[4], b[5], b[6], b[7] = byte(op), ctlVersion, 0, 0
	binary.LittleEndian.PutUint32(b[8:], uint32(rank))
}

// encodeHello writes a hello into b and returns its length.
func encodeHello(b []byte, rank int, counter uint64, nd *[16]byte, proof *core.Proof) int {
	putCtl(b, opHello, rank)
	binary.LittleEndian.PutUint64(b[ctlHdr:], counter)
	copy(b[ctlHdr+8:], nd[:])
	copy(b[ctlHdr+24:], proof[:])
	return helloLen
}

// encodeBye writes a goodbye whose last frame came before seq.
func encodeBye(b []byte, rank int, seq uint16) int {
	putCtl(b, opBye, rank)
	binary.LittleEndian.PutUint32(b[ctlHdr:], uint32(seq))
	return byeLen
}

// encodeCredits writes a credit message returning cr[i] credits of class
// i.
func encodeCredits(b []byte, rank int, cr []uint16) int {
	putCtl(b, opCredit, rank)
	b[ctlHdr] = byte(len(cr))
	b[ctlHdr+1], b[ctlHdr+2], b[ctlHdr+3] = 0, 0, 0
	for i, c := range cr {
		binary.LittleEndian.PutUint16(b[creditHdr+2*i:], c)
	}
	return creditHdr + 2*len(cr)
}

// decodeCtl parses a control message of a job of size ranks. Every field
// is checked; anything else is an error and the message is dropped.
func decodeCtl(b []byte, size int) (ctlMsg, error) {
	var m ctlMsg
	if len(b) < ctlHdr {
		return m, fmt.Errorf("a %d-byte control message", len(b))
	}
	if binary.LittleEndian.Uint32(b) != ctlMagic || b[5] != ctlVersion || b[6] != 0 || b[7] != 0 {
		return m, fmt.Errorf("no control message header (% x)", b[:8])
	}
	m.op = ctlOp(b[4])
	r := binary.LittleEndian.Uint32(b[8:])
	if int64(r) >= int64(size) {
		return m, fmt.Errorf("%v from rank %d of a %d-rank job", m.op, r, size)
	}
	m.rank = int(r)
	want := 0
	switch m.op {
	case opHello:
		want = helloLen
	case opBye:
		want = byeLen
	case opProbe, opDrop:
		want = ctlHdr
	case opCredit:
		if len(b) < creditHdr || b[ctlHdr] > maxClasses || b[ctlHdr+1]|b[ctlHdr+2]|b[ctlHdr+3] != 0 {
			return m, fmt.Errorf("credit message of %d bytes", len(b))
		}
		want = creditHdr + 2*int(b[ctlHdr])
	default:
		return m, fmt.Errorf("unknown control op %d", b[4])
	}
	if len(b) != want {
		return m, fmt.Errorf("%v of %d bytes, want %d", m.op, len(b), want)
	}
	switch m.op {
	case opHello:
		m.counter = binary.LittleEndian.Uint64(b[ctlHdr:])
		copy(m.nd[:], b[ctlHdr+8:])
		copy(m.proof[:], b[ctlHdr+24:])
	case opBye:
		v := binary.LittleEndian.Uint32(b[ctlHdr:])
		if v > 0xffff {
			return m, fmt.Errorf("bye with sequence %d", v)
		}
		m.seq = uint16(v)
	case opCredit:
		n := int(b[ctlHdr])
		m.nclass = n
		for i := range n {
			m.credits[i] = binary.LittleEndian.Uint16(b[creditHdr+2*i:])
		}
	}
	return m, nil
}

// frameSrc reads the source rank of a frame's header without decoding
// the rest: what the token check needs to find the session.
func frameSrc(b []byte) (uint32, bool) {
	if len(b) < 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[4:]), true
}

// published is what a module publishes through the bootstrap: its
// endpoint's address and what a peer needs before it sends — the
// credits it starts with per receive class and the buffer sizes that
// choose a class — and the process's identity for liveness.
type published struct {
	name    []byte   // fi_getname
	pid     int      // the process
	host    [16]byte // the host (boot id), to tell peers on this host
	bufSize []int    // per class: bytes a buffer holds, header included
	window  []int    // per class: credits a sender starts with; 0: not counted
}

// pubVersion is the wire's version, checked where a peer's address is
// read: a rank of another version fails there, by name, rather than
// talking past this one (2: the control class's tag went from 0xff to 0).
const pubVersion = 2

func (p *published) encode() []byte {
	b := []byte{pubVersion, byte(len(p.name))}
	b = append(b, p.name...)
	b = binary.LittleEndian.AppendUint32(b, uint32(p.pid))
	b = append(b, p.host[:]...)
	b = append(b, byte(len(p.bufSize)))
	for i := range p.bufSize {
		b = binary.LittleEndian.AppendUint32(b, uint32(p.bufSize[i]))
		b = binary.LittleEndian.AppendUint32(b, uint32(p.window[i]))
	}
	return b
}

func decodePublished(b []byte) (*published, error) {
	bad := func(what string) (*published, error) {
		return nil, fmt.Errorf("published address: %s (%d bytes)", what, len(b))
	}
	if len(b) < 2 {
		return bad("short")
	}
	if b[0] != pubVersion {
		return nil, fmt.Errorf("published address of wire version %d, this rank's is %d: ranks of different gobtl builds", b[0], pubVersion)
	}
	n := int(b[1])
	b0 := b
	b = b[2:]
	if n == 0 || len(b) < n+4+16+1 {
		return bad("short")
	}
	p := &published{name: append([]byte(nil), b[:n]...)}
	b = b[n:]
	p.pid = int(binary.LittleEndian.Uint32(b))
	copy(p.host[:], b[4:20])
	k := int(b[20])
	b = b[21:]
	if k == 0 || k > maxClasses || len(b) != 8*k {
		return nil, fmt.Errorf("published address: %d classes in %d bytes", k, len(b0))
	}
	for i := range k {
		p.bufSize = append(p.bufSize, int(binary.LittleEndian.Uint32(b[8*i:])))
		p.window = append(p.window, int(binary.LittleEndian.Uint32(b[8*i+4:])))
	}
	return p, nil
}
