package ofi

import (
	"encoding/binary"

	"github.com/gobtl/gobtl/core"
)

// Sessions. A reliable-datagram endpoint takes messages from anyone who
// knows its address, and what a provider says about a message's source
// is the sender's claim (rxm's connection request names an address, it
// does not prove it). So every direction of every pair of ranks is a
// session that the sender opens with a hello proving it holds the job
// key, and every message after it carries the session's token as its
// remote CQ data:
//
//	sender → receiver  hello  counter, Nd, HMAC_key(transcript)
//
// The transcript (core.Transcript) names both ranks and the addresses
// they published through the bootstrap — never an address a message
// claims — the sender's fresh nonce Nd and its counter, which grows with
// every session the sender's module opens (it starts at the wall clock's
// nanoseconds, so a restarted process goes on from above). The receiver
// checks the proof and takes a counter only above the last it took from
// that rank, so a hello replayed from an earlier session is refused and
// cannot bring back an old token. Both ends derive the session's token,
// T = HMAC_key("ofi-session", transcript), 47 bits of it; the receiver
// accepts frames and session messages (credits, probes, goodbyes) from
// that rank only with T. The key is never on the wire, and T only once
// the session carries traffic: a process outside the job learns it only
// by reading the network, the bar of softrc's TCP connections (hijacking
// an established connection).
//
// The hello needs no answer, so a frame goes with it at once (0-RTT): a
// rank that sends and then computes is not waiting on its peer to call
// in before its bytes leave. It proves the sender to the receiver; the
// receiver is whoever holds the address the bootstrap published for its
// rank (the bootstrap is trusted with the job key itself). Each direction
// is its own session, so two ranks that start at once open two.

// Labels of the proofs and tokens (core.Transcript.Protocol).
const (
	authProtocol    = "ofi"
	sessionProtocol = "ofi-session"
)

// A message's remote CQ data is its session's token in the high 47 bits,
// on frames the no-credit bit (dataNoCredit: a frame that spent no
// credit, core.SendNoFlowControl) and the direction's sequence number in
// the low 16 (session.go: the receiver delivers frames in order).
const (
	seqBits      = 16
	tokShift     = seqBits + 1
	dataNoCredit = 1 << seqBits
)

func cqData(tok uint64, seq uint16) uint64 { return tok<<tokShift | uint64(seq) }

func tokenOf(data uint64) uint64 { return data >> tokShift }

// identity is a rank as a transcript names it: rank and published
// address.
func identity(rank int, name []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(rank))
	return append(b, name...)
}

// transcript of a session from sender s to receiver r.
func transcript(s, r []byte, counter uint64, nd [16]byte) *core.Transcript {
	t := &core.Transcript{Protocol: authProtocol, Dialer: s, Acceptor: r, DialerNonce: core.Nonce(nd)}
	binary.LittleEndian.PutUint64(t.Nonce[:], counter)
	return t
}

// sessionToken derives the 47-bit token of t's session; never zero,
// which marks a message outside any session.
func sessionToken(k *core.JobKey, t *core.Transcript) uint64 {
	st := *t
	st.Protocol = sessionProtocol
	p := k.Prove(core.Dialer, &st)
	if tok := binary.LittleEndian.Uint64(p[:8]) >> tokShift; tok != 0 {
		return tok
	}
	return 1
}

// makeHello is the sender's side: the hello's proof and the session's
// token.
func makeHello(k *core.JobKey, s, r []byte, counter uint64, nd [16]byte) (core.Proof, uint64) {
	t := transcript(s, r, counter, nd)
	return k.Prove(core.Dialer, t), sessionToken(k, t)
}

// checkHello is the receiver's: the proof must hold and the counter be
// above *last, the last taken from that rank, which it moves. It returns
// the session's token, or 0 and why not.
func checkHello(k *core.JobKey, s, r []byte, counter uint64, nd [16]byte, proof []byte, last *uint64) (uint64, string) {
	t := transcript(s, r, counter, nd)
	if !k.Check(core.Dialer, t, proof) {
		return 0, "a wrong proof: the sender does not hold the job key"
	}
	if counter <= *last {
		return 0, "a hello replayed from an earlier session"
	}
	*last = counter
	return sessionToken(k, t), ""
}
