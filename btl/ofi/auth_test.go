package ofi

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/core"
)

var (
	idSender   = identity(1, []byte("addr-of-1"))
	idReceiver = identity(0, []byte("addr-of-0"))
)

func TestAHelloGivesBothEndsTheSameToken(t *testing.T) {
	k := core.NewJobKey()
	var last uint64
	nd := core.NewNonce()
	proof, tok := makeHello(k, idSender, idReceiver, 10, nd)
	got, why := checkHello(k, idSender, idReceiver, 10, nd, proof[:], &last)
	if why != "" || tok == 0 || got != tok || last != 10 {
		t.Fatalf("tokens %x and %x (%s), last %d", tok, got, why, last)
	}
	// A later session is another token.
	nd2 := core.NewNonce()
	p2, tok2 := makeHello(k, idSender, idReceiver, 11, nd2)
	if got, why := checkHello(k, idSender, idReceiver, 11, nd2, p2[:], &last); got != tok2 || why != "" || tok2 == tok {
		t.Fatalf("second session: %x, %x (%s), first %x", got, tok2, why, tok)
	}
}

func TestAHelloWithoutTheKeyOrReplayedOrMovedIsRefused(t *testing.T) {
	k, other := core.NewJobKey(), core.NewJobKey()
	nd := core.NewNonce()
	var last uint64
	forged, _ := makeHello(other, idSender, idReceiver, 5, nd)
	if tok, why := checkHello(k, idSender, idReceiver, 5, nd, forged[:], &last); tok != 0 || why == "" || last != 0 {
		t.Fatalf("a hello under another key: token %x, %q, last %d", tok, why, last)
	}
	good, _ := makeHello(k, idSender, idReceiver, 5, nd)
	if tok, _ := checkHello(k, idSender, idReceiver, 5, nd, good[:], &last); tok == 0 {
		t.Fatal("a good hello was refused")
	}
	if tok, why := checkHello(k, idSender, idReceiver, 5, nd, good[:], &last); tok != 0 || !bytes.Contains([]byte(why), []byte("replayed")) {
		t.Fatalf("a replayed hello: token %x, %q", tok, why)
	}
	// Its proof serves no other counter, nonce, sender or receiver.
	last = 0
	for name, try := range map[string]func() uint64{
		"counter": func() uint64 { tok, _ := checkHello(k, idSender, idReceiver, 6, nd, good[:], &last); return tok },
		"nonce": func() uint64 {
			tok, _ := checkHello(k, idSender, idReceiver, 5, core.NewNonce(), good[:], &last)
			return tok
		},
		"sender": func() uint64 {
			tok, _ := checkHello(k, identity(2, []byte("addr-of-1")), idReceiver, 5, nd, good[:], &last)
			return tok
		},
		"receiver": func() uint64 {
			tok, _ := checkHello(k, idSender, identity(0, []byte("elsewhere")), 5, nd, good[:], &last)
			return tok
		},
		// The sender's proof is not a proof for the other direction.
		"reflected": func() uint64 { tok, _ := checkHello(k, idReceiver, idSender, 5, nd, good[:], &last); return tok },
	} {
		if try() != 0 {
			t.Errorf("the hello's proof served another %s", name)
		}
	}
}

func TestControlMessagesRoundTripAndGarbageIsRefused(t *testing.T) {
	b := make([]byte, ctlBufSize)
	nd := core.NewNonce()
	var pr core.Proof
	pr[2] = 3
	n := encodeHello(b, 3, 77, (*[16]byte)(&nd), &pr)
	m, err := decodeCtl(b[:n], 4)
	if err != nil || m.op != opHello || m.rank != 3 || m.counter != 77 || m.nd != nd || m.proof != pr {
		t.Fatalf("hello: %+v, %v", m, err)
	}
	if _, err := decodeCtl(b[:n], 3); err == nil {
		t.Fatal("a hello from rank 3 of a 3-rank job accepted")
	}
	if _, err := decodeCtl(b[:n-1], 4); err == nil {
		t.Fatal("a short hello accepted")
	}
	n = encodeCredits(b, 2, []uint16{5, 0, 7})
	m, err = decodeCtl(b[:n], 4)
	if err != nil || m.op != opCredit || m.nclass != 3 || m.credits[0] != 5 || m.credits[2] != 7 {
		t.Fatalf("credits: %+v, %v", m, err)
	}
	n = encodeBye(b, 1, 65535)
	if m, err = decodeCtl(b[:n], 4); err != nil || m.op != opBye || m.seq != 65535 {
		t.Fatalf("bye: %+v, %v", m, err)
	}
	for _, bad := range [][]byte{nil, []byte("GOFI"), bytes.Repeat([]byte{0xff}, 64)} {
		if _, err := decodeCtl(bad, 4); err == nil {
			t.Errorf("garbage %q accepted", bad)
		}
	}
}

func FuzzDecodeCtl(f *testing.F) {
	b := make([]byte, ctlBufSize)
	var nd [16]byte
	var pr core.Proof
	f.Add(b[:encodeHello(b, 1, 9, &nd, &pr)])
	f.Add(b[:encodeCredits(b, 1, []uint16{1, 2})])
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := decodeCtl(in, 8)
		if err == nil && (m.rank < 0 || m.rank >= 8 || m.nclass > maxClasses) {
			t.Fatalf("accepted %+v", m)
		}
	})
}

func TestPublishedAddressesRoundTrip(t *testing.T) {
	p := &published{name: []byte("fi_sockaddr_in://1.2.3.4:5"), pid: 42, bufSize: []int{160, 2048}, window: []int{8, 4}}
	p.host[3] = 9
	q, err := decodePublished(p.encode())
	if err != nil || !bytes.Equal(q.name, p.name) || q.pid != 42 || q.host != p.host || q.bufSize[1] != 2048 || q.window[0] != 8 {
		t.Fatalf("%+v, %v", q, err)
	}
	enc := p.encode()
	for i := range enc {
		if _, err := decodePublished(enc[:i]); err == nil {
			t.Fatalf("a %d-byte prefix decoded", i)
		}
	}
	// A rank of another build, whose wire differs, is named as such.
	enc[0]--
	if _, err := decodePublished(enc); err == nil || !strings.Contains(err.Error(), "different gobtl builds") {
		t.Fatalf("an address of wire version %d: %v", enc[0], err)
	}
}
