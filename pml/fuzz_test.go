package pml

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gobtl/gobtl/core"
)

// FuzzRendezvousBodies decodes any bytes as the body of a RNDV_START, a
// RNDV_REPLY and a RNDV_FIN, as the engine does with what a peer sends:
// each either fails with a core.FrameError or decodes to a message that
// is within its bounds and encodes back to the same bytes.
func FuzzRendezvousBodies(f *testing.F) {
	keys := []keyRef{{sub: 0, key: core.MemKey{Addr: 1 << 30, Len: 1 << 20, Key: 0xabc, Aux: 7}}, {sub: 3, key: core.MemKey{Len: 5}}}
	b := make([]byte, startFixed+maxSubchannels*keyEntry+64)
	n := encodeStart(b, 1<<20, 42, ProtoRead, keys, 16, startChoose)
	f.Add(append(b[:n:n], make([]byte, 16)...))
	f.Add(b[:encodeReply(b, 42, 43, 1<<20, keys)])
	f.Add(b[:encodeFin(b, 43, 1<<20, finOK)])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		frameErr := func(what string, err error) {
			var fe *core.FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("%s: %v is not a FrameError", what, err)
			}
		}
		out := make([]byte, len(p)+startFixed+replyFixed+finSize)
		var s startMsg
		if err := s.decode(3, p); err != nil {
			frameErr("start", err)
		} else {
			if s.nkeys > maxSubchannels || uint64(len(s.inline)) > s.total || s.proto == 0 || s.proto >= protoEnd {
				t.Fatalf("start out of bounds: %+v", s)
			}
			var flags byte
			if s.choose {
				flags = startChoose
			}
			n := encodeStart(out, s.total, s.sreq, s.proto, s.keys[:s.nkeys], len(s.inline), flags)
			n += copy(out[n:], s.inline)
			// Byte 18's other bits, byte 19 and each key's 7 pad bytes are
			// reserved: the encoder writes zeros where a peer may have sent
			// anything.
			if n != len(p) || !bytes.Equal(out[:18], p[:18]) || out[18] != p[18]&startChoose || !bytes.Equal(out[n-len(s.inline):n], s.inline) {
				t.Fatalf("start does not round-trip: %x -> %+v -> %x", p, s, out[:n])
			}
		}
		var r replyMsg
		if err := r.decode(3, p); err != nil {
			frameErr("reply", err)
		} else {
			if r.nkeys > maxSubchannels {
				t.Fatalf("reply with %d keys", r.nkeys)
			}
			if n := encodeReply(out, r.sreq, r.rreq, r.accept, r.keys[:r.nkeys]); n != len(p) || !bytes.Equal(out[:25], p[:25]) {
				t.Fatalf("reply does not round-trip: %x -> %+v -> %x", p, r, out[:n])
			}
		}
		var fin finMsg
		if err := fin.decode(3, p); err != nil {
			frameErr("fin", err)
		} else {
			if fin.status > finFailed {
				t.Fatalf("fin status %d", fin.status)
			}
			if n := encodeFin(out, fin.req, fin.bytes, fin.status); n != len(p) || !bytes.Equal(out[:20], p[:20]) {
				t.Fatalf("fin does not round-trip: %x -> %+v -> %x", p, fin, out[:n])
			}
		}
	})
}
