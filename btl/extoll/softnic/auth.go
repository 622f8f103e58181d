package softnic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/gobtl/gobtl/core"
)

// Every connection to the card's engines — the network engine's TCP
// listener, the RMA engine's TCP listener and its unix socket — proves it
// belongs to the job before the engine acts on anything it sends (core's
// challenge–response, under Config.Key):
//
//	dialer   → engine  hello (kind, version, rank, size, job hash), nonce Nd
//	engine   → dialer  nonce Ne, proof of the engine
//	dialer   → engine  proof of the dialer
//
// The proofs cover both nonces, the dialer's hello and the engine's kind
// and rank, so one answer serves one connection only, and the dialer
// sends nothing into a mailbox or a region of an engine that has not
// proved it is its peer's. A connection that fails is closed unanswered,
// counted (links_rejected) and reported to Config.OnReject.

// authProtocol labels the card's proofs (core.Transcript.Protocol).
const authProtocol = "softnic"

// The hello opens every connection: who is calling, for which job.
const (
	helloVELO  = 0x4c455658 // "XVEL"
	helloRMA   = 0x414d5258 // "XRMA"
	helloBytes = 24
	helloVer   = 2 // 2: the challenge–response follows
	// challengeBytes is the engine's answer to a hello: its nonce and proof.
	challengeBytes = core.NonceSize + core.ProofSize
)

// errRejected marks a connection that failed the handshake.
var errRejected = errors.New("rejected")

// engineID names the engine a connection is for, as both ends know it.
func engineID(kind uint32, rank int) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint32(b[0:], kind)
	binary.LittleEndian.PutUint32(b[4:], uint32(rank))
	return b[:]
}

func (d *Device) hello(kind uint32) [helloBytes]byte {
	var b [helloBytes]byte
	binary.LittleEndian.PutUint32(b[0:], kind)
	binary.LittleEndian.PutUint32(b[4:], helloVer)
	binary.LittleEndian.PutUint32(b[8:], uint32(d.cfg.Rank))
	binary.LittleEndian.PutUint32(b[12:], uint32(d.cfg.Size))
	binary.LittleEndian.PutUint64(b[16:], d.jobHash())
	return b
}

// writeHello is the dialer's side of the handshake on c, a connection to
// the kind engine of rank.
func (d *Device) writeHello(c net.Conn, kind uint32, rank int) error {
	c.SetDeadline(time.Now().Add(d.cfg.ConnectTimeout))
	defer c.SetDeadline(time.Time{})
	h := d.hello(kind)
	t := &core.Transcript{Protocol: authProtocol, Dialer: h[:], Acceptor: engineID(kind, rank), DialerNonce: core.NewNonce()}
	var out [helloBytes + core.NonceSize]byte
	copy(out[:], h[:])
	copy(out[helloBytes:], t.DialerNonce[:])
	if _, err := c.Write(out[:]); err != nil {
		return err
	}
	var in [challengeBytes]byte
	if _, err := io.ReadFull(c, in[:]); err != nil {
		return fmt.Errorf("no challenge: %w", err)
	}
	copy(t.Nonce[:], in[:])
	if !d.cfg.Key.Check(core.Acceptor, t, in[core.NonceSize:]) {
		err := fmt.Errorf("rank %d's engine failed to prove it belongs to the job", rank)
		d.reject(c, err)
		return fmt.Errorf("%w: %w", errRejected, err)
	}
	p := d.cfg.Key.Prove(core.Dialer, t)
	_, err := c.Write(p[:])
	return err
}

// readHello is the engine's side of the handshake on an accepted
// connection: it returns the dialer's rank once it has proved itself, and
// takes the connection out of the pending set either way.
func (d *Device) readHello(c net.Conn, sv *served, kind uint32) (int, error) {
	rank, err := d.checkHello(c, kind)
	sv.pend.Done()
	if err != nil {
		d.reject(c, err)
	}
	return rank, err
}

func (d *Device) checkHello(c net.Conn, kind uint32) (int, error) {
	// The dialer sends its hello as it connects and its proof one round
	// trip later: a connection silent for longer is not the job's.
	limit := core.PendingTimeout
	if d.pending.Timeout > 0 {
		limit = d.pending.Timeout
	}
	c.SetDeadline(time.Now().Add(min(d.cfg.ConnectTimeout, limit)))
	defer c.SetDeadline(time.Time{})
	var b [helloBytes + core.NonceSize]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, fmt.Errorf("no hello: %w", err)
	}
	rank := int(binary.LittleEndian.Uint32(b[8:]))
	switch {
	case binary.LittleEndian.Uint32(b[0:]) != kind, binary.LittleEndian.Uint32(b[4:]) != helloVer:
		return 0, errors.New("bad hello")
	case binary.LittleEndian.Uint64(b[16:]) != d.jobHash(), int(binary.LittleEndian.Uint32(b[12:])) != d.cfg.Size:
		return 0, errors.New("hello from another job")
	case rank < 0 || rank >= d.cfg.Size:
		return 0, fmt.Errorf("hello from rank %d of %d", rank, d.cfg.Size)
	}
	t := &core.Transcript{Protocol: authProtocol, Dialer: b[:helloBytes], Acceptor: engineID(kind, d.cfg.Rank), Nonce: core.NewNonce()}
	copy(t.DialerNonce[:], b[helloBytes:])
	var out [challengeBytes]byte
	copy(out[:], t.Nonce[:])
	p := d.cfg.Key.Prove(core.Acceptor, t)
	copy(out[core.NonceSize:], p[:])
	if _, err := c.Write(out[:]); err != nil {
		return 0, err
	}
	var in [core.ProofSize]byte
	if _, err := io.ReadFull(c, in[:]); err != nil {
		return 0, fmt.Errorf("no proof: %w", err)
	}
	if !d.cfg.Key.Check(core.Dialer, t, in[:]) {
		return 0, fmt.Errorf("a connection naming itself rank %d failed to prove it belongs to the job", rank)
	}
	return rank, nil
}

// reject counts a connection that failed the handshake and reports it.
func (d *Device) reject(c net.Conn, why error) {
	if d.closed.Load() {
		return
	}
	d.rejected.Add(1)
	if d.cfg.OnReject != nil {
		d.cfg.OnReject(fmt.Errorf("softnic: %w: connection from %s: %w", errRejected, c.RemoteAddr(), why))
	}
}
