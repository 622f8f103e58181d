package softrc

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/core"
)

// FuzzHeaderDecode: any 40 bytes either fail to decode or decode to a
// header that encodes back to the same bytes (the syndrome byte aside,
// whose two fields share it), with a payload length below 2^31 and the
// fixed size of a handshake packet.
func FuzzHeaderDecode(f *testing.F) {
	var b [hdrSize]byte
	for _, h := range []header{
		{op: opHello, length: helloSize}, {op: opChallenge, length: challengeSize}, {op: opProof, length: proofSize},
		{op: opSend, dqpn: 0x42, psn: 7, length: 4096}, {op: opNak, syndrome: nakRNR, rnrCode: 14},
		{op: opWrite, key: 0xdeadbeef, raddr: 1 << 40, length: 1 << 20},
	} {
		h.encode(b[:])
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < hdrSize {
			return
		}
		var h header
		if err := h.decode(in); err != nil {
			return
		}
		if h.length >= maxPayload {
			t.Fatalf("decoded a payload of %d bytes", h.length)
		}
		if want := handshakeSize[h.op]; want != 0 && h.length != want {
			t.Fatalf("handshake opcode %d with %d bytes", h.op, h.length)
		}
		var out [hdrSize]byte
		h.encode(out[:])
		if !bytes.Equal(out[:2], in[:2]) || !bytes.Equal(out[3:], in[3:hdrSize]) {
			t.Fatalf("decode/encode changed the header:\n%x\n%x", in[:hdrSize], out)
		}
	})
}

// FuzzAcceptedLink feeds what an outsider may send to a port — any bytes —
// into an accepted link of a running device, through a socket, and
// checks the device's promise: without the job's key nothing gets past
// the handshake. The link is either still waiting for its proof or
// rejected (counted); it never carries traffic, no QP hears of it, and
// the device does not panic.
func FuzzAcceptedLink(f *testing.F) {
	var hello [hdrSize + helloSize]byte
	(&header{op: opHello, length: helloSize}).encode(hello[:])
	f.Add(hello[:])
	proof := append(append([]byte(nil), hello[:]...), make([]byte, hdrSize+proofSize)...)
	(&header{op: opProof, length: proofSize}).encode(proof[len(hello):])
	f.Add(proof)
	var send [hdrSize]byte
	(&header{op: opSend, dqpn: 0x42, psn: 1000}).encode(send[:])
	f.Add(send[:])
	f.Add(append(hello[:], send[:]...))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))

	e := newEnd(f, endOpts{cfg: DeviceConfig{Key: core.NewJobKey()}})
	d := e.dev
	f.Fuzz(func(t *testing.T, in []byte) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Skip(err)
		}
		defer unix.Close(fds[1])
		if len(in) > 0 {
			if _, err := unix.Write(fds[1], in); err != nil {
				t.Skip(err)
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		p, err := d.portLocked(1)
		if err != nil {
			t.Fatal(err)
		}
		before := d.stats.LinksRejected
		l, err := d.addLink(p, fds[0], false)
		if err != nil {
			unix.Close(fds[0])
			t.Fatal(err)
		}
		l.receive(nowNS())
		switch {
		case l.auth == authDone:
			t.Fatalf("%d bytes without the key opened the link", len(in))
		case l.dead && d.stats.LinksRejected != before+1:
			t.Fatalf("the link died (%v) but was not counted as rejected", l.err)
		}
		for _, q := range d.qps {
			if q.in == l {
				t.Fatal("a QP heard the link")
			}
		}
		if !l.dead {
			d.reject(l, errRejected, nowNS())
		}
	})
}
