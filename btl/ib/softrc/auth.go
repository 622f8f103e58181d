package softrc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/core"
)

// Links prove they belong to the job before anything they carry is looked
// at (core's challenge–response, under DeviceConfig.Key):
//
//	dialer   → acceptor  HELLO     dialer's port address, nonce Nd
//	acceptor → dialer    CHALLENGE nonce Na, proof of the acceptor
//	dialer   → acceptor  PROOF     proof of the dialer
//
// Each proof is an HMAC over both nonces and both ports' addresses (the
// dialer's as its HELLO says, the acceptor's as the dialer dialed it).
// The dialer runs its side inside the connect, before the link exists for
// its QPs (as an HCA resolves and connects inside ibv_modify_qp), so its
// traffic never goes to a port that is not the job's and needs no polling
// to get going. The acceptor runs its side as packets arrive and reads
// nothing else until it has checked the dialer's proof. A connection that
// sends anything out of turn, a malformed packet or a wrong proof before
// then is rejected: closed, counted (Stats.LinksRejected) and its reason
// kept (LastRejection) — it never reached a QP. Until it has proved
// itself an accepted link holds a few hundred bytes, not the receive
// buffer and send ring of a working one.

// authProtocol labels softrc's proofs (core.Transcript.Protocol).
const authProtocol = "softrc"

// Limits on connections that have not proved themselves yet: a port
// holds at most core.MaxPending of them and drops, at the next accept,
// one older than core.PendingTimeout (core.Pending, which the EXTOLL
// software card's engines share).
const (
	// pendingBuf is an unauthenticated link's receive buffer: room for a
	// header and the largest handshake payload, twice.
	pendingBuf = 2 * (hdrSize + challengeSize)
	// handshakeTimeout bounds the dialer's side of the handshake: the
	// acceptor answers from its process's polls or, when that does not
	// poll, from its device goroutine after IdleAfter.
	handshakeTimeout = 20 * time.Second
)

// Handshake stages of an accepted link.
const (
	authHello = iota // waits for HELLO
	authProof        // sent CHALLENGE, waits for PROOF
	authDone
)

// errRejected marks the error of a connection rejected by the handshake.
var errRejected = errors.New("rejected")

// addr is a port's identity on the wire: GID and LID.
func addr(gid [16]byte, lid uint16) [addrSize]byte {
	var a [addrSize]byte
	copy(a[:16], gid[:])
	binary.LittleEndian.PutUint16(a[16:], lid)
	return a
}

// handshake is the dialer's side, on the connected socket fd to the port
// (gid, lid), before the link exists: HELLO, wait for the CHALLENGE and
// check it, PROOF. It blocks and is called without d.mu; the key and the
// port's address do not change once the port has started.
func (p *port) handshake(fd int, gid [16]byte, lid uint16) error {
	mine, peer := addr(p.gid, p.lid), addr(gid, lid)
	t := &core.Transcript{Protocol: authProtocol, Dialer: mine[:], Acceptor: peer[:], DialerNonce: core.NewNonce()}
	deadline := time.Now().Add(handshakeTimeout)
	var out [hdrSize + helloSize]byte
	h := header{op: opHello, length: helloSize}
	h.encode(out[:])
	copy(out[hdrSize:], mine[:])
	copy(out[hdrSize+addrSize:], t.DialerNonce[:])
	if err := ioFull(fd, out[:], unix.POLLOUT, deadline); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	var in [hdrSize + challengeSize]byte
	if err := ioFull(fd, in[:], unix.POLLIN, deadline); err != nil {
		return fmt.Errorf("challenge: %w", err)
	}
	if err := h.decode(in[:]); err != nil || h.op != opChallenge {
		return fmt.Errorf("%w: no challenge but opcode %d (%v)", errRejected, in[0], err)
	}
	copy(t.Nonce[:], in[hdrSize:])
	if !p.d.cfg.Key.Check(core.Acceptor, t, in[hdrSize+core.NonceSize:]) {
		return fmt.Errorf("%w: the port dialed failed to prove it belongs to the job", errRejected)
	}
	proof := p.d.cfg.Key.Prove(core.Dialer, t)
	h = header{op: opProof, length: proofSize}
	var fin [hdrSize + proofSize]byte
	h.encode(fin[:])
	copy(fin[hdrSize:], proof[:])
	if err := ioFull(fd, fin[:], unix.POLLOUT, deadline); err != nil {
		return fmt.Errorf("proof: %w", err)
	}
	return nil
}

// ioFull reads (POLLIN) or writes (POLLOUT) all of b on the non-blocking
// socket fd by the deadline.
func ioFull(fd int, b []byte, ev int16, deadline time.Time) error {
	for len(b) > 0 {
		var n int
		var err error
		if ev == unix.POLLIN {
			n, err = unix.Read(fd, b)
			if err == nil && n == 0 {
				return errLinkClosed
			}
		} else {
			n, err = unix.Write(fd, b)
		}
		switch {
		case err == nil:
			b = b[n:]
			continue
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			return err
		}
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return fmt.Errorf("no answer within %v", handshakeTimeout)
		}
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: ev}}, ms); err != nil && err != unix.EINTR {
			return fmt.Errorf("poll: %w", err)
		}
	}
	return nil
}

// transcript is what both ends of an accepted link prove they agree on.
func (l *link) transcript() *core.Transcript {
	dialer, acceptor := addr(l.peerGID, l.peerLID), addr(l.port.gid, l.port.lid)
	return &core.Transcript{Protocol: authProtocol, Dialer: dialer[:], Acceptor: acceptor[:], DialerNonce: l.nonceD, Nonce: l.nonceA}
}

// beginHandshake takes a packet that arrives on an accepted link that has
// not proved itself: the one handshake packet its stage waits for, whose
// payload goes to l.hsIn; anything else rejects the link.
func (d *Device) beginHandshake(l *link, now int64) {
	want := uint8(opHello)
	if l.auth == authProof {
		want = opProof
	}
	if l.h.op != want {
		d.reject(l, fmt.Errorf("opcode %d before the connection proved it belongs to the job", l.h.op), now)
		return
	}
	l.setSink(l.hsIn[:l.h.length], nil)
	l.act.kind = actHandshake
}

// finishHandshake acts on a handshake packet's payload.
func (d *Device) finishHandshake(l *link, now int64) {
	in := l.hsIn[:l.h.length]
	switch l.h.op {
	case opHello:
		copy(l.peerGID[:], in[:16])
		l.peerLID = binary.LittleEndian.Uint16(in[16:])
		copy(l.nonceD[:], in[addrSize:])
		l.nonceA = core.NewNonce()
		p := d.cfg.Key.Prove(core.Acceptor, l.transcript())
		var b [challengeSize]byte
		copy(b[:], l.nonceA[:])
		copy(b[core.NonceSize:], p[:])
		l.auth = authProof
		l.sendHandshake(opChallenge, b[:])
	case opProof:
		if !d.cfg.Key.Check(core.Dialer, l.transcript(), in) {
			d.reject(l, fmt.Errorf("a connection naming itself %s:%d failed to prove it belongs to the job", gidIP(l.peerGID), l.peerLID), now)
			return
		}
		l.authenticated()
	}
}

// sendHandshake writes the acceptor's CHALLENGE ahead of anything else:
// the link's send ring stays shut until the handshake is done.
func (l *link) sendHandshake(op uint8, payload []byte) {
	h := header{op: op, length: uint32(len(payload))}
	h.encode(l.hs[l.hsLen:])
	l.hsLen += hdrSize
	l.hsLen += copy(l.hs[l.hsLen:], payload)
	l.d.stats.PacketsSent++
	l.flush(nowNS())
}

// flushHandshake writes what is left of the handshake packets; it reports
// whether the link may go on to its send ring (handshake written and
// done).
func (l *link) flushHandshake(now int64) bool {
	for l.hsOff < l.hsLen {
		b := l.hs[l.hsOff:l.hsLen]
		r, e := sendNB(l.fd, b)
		switch e {
		case 0:
			l.hsOff += r
			l.d.stats.BytesSent += int64(r)
		case unix.EINTR:
		case unix.EAGAIN:
			l.armOut(true)
			return false
		default:
			l.d.linkFailed(l, fmt.Errorf("write: %w", e), now)
			return false
		}
	}
	l.hsOff, l.hsLen = 0, 0
	return l.auth == authDone
}

// authenticated opens an accepted link for traffic: it gets its working
// buffers.
func (l *link) authenticated() {
	l.pend.Done()
	l.auth = authDone
	b := make([]byte, rxBufSize)
	l.rhi = copy(b, l.rbuf[l.rlo:l.rhi])
	l.rlo, l.rbuf = 0, b
	l.tx = make([]txItem, 64)
	l.port.markSpares(l.peerGID, l.peerLID)
}

// reject closes an accepted link that failed to prove it belongs to the
// job; no QP ever heard it.
func (d *Device) reject(l *link, why error, now int64) {
	if l.dead {
		return
	}
	d.rejected(fmt.Errorf("%w: connection from %s on port %d: %w", errRejected, l.remote(), l.port.num, why))
	d.linkFailed(l, fmt.Errorf("%w: %w", errRejected, why), now)
}

// rejected counts a rejected connection and keeps why. Called with d.mu
// held.
func (d *Device) rejected(err error) {
	d.stats.LinksRejected++
	d.lastReject = fmt.Errorf("softrc: %s: %w", d.name, err)
}

// remote names the other end of a link for a log line: the TCP peer.
func (l *link) remote() string {
	sa, err := unix.Getpeername(l.fd)
	if err != nil {
		return "?"
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return fmt.Sprintf("%d.%d.%d.%d:%d", a.Addr[0], a.Addr[1], a.Addr[2], a.Addr[3], a.Port)
	case *unix.SockaddrInet6:
		return fmt.Sprintf("[%x]:%d", a.Addr, a.Port)
	}
	return "?"
}

// admit enters an accepted link into the port's pending set, which drops
// links stuck in the handshake for core.PendingTimeout and, at
// core.MaxPending, the oldest. Called with d.mu held, as the drops are.
func (d *Device) admit(l *link, now int64) {
	l.pend = d.pending.Admit(time.Duration(now), func() {
		d.reject(l, errors.New("no proof in time"), now)
	})
}

// LastRejection says why the latest connection was rejected (nil: none
// was).
func (d *Device) LastRejection() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastReject
}
