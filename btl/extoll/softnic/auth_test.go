package softnic

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// TestOutsidersReachNoEngine attacks every listener of a running card —
// the network engine's TCP port, the RMA engine's TCP port and its unix
// socket — as a process that is not of the job would: the old hello with
// the right job hash (which names the job's files, so anyone on the host
// knows it) followed by mailbox packets, a hello answered with a proof
// under another key, garbage, a hello of another job. No packet reaches
// the mailbox, every connection is rejected and counted, and the job's
// own traffic goes on.
func TestOutsidersReachNoEngine(t *testing.T) {
	var heard atomic.Int64
	devs := job(t, 2, 64, func(c *Config) {
		c.Transport = TCP
		c.OnReject = func(error) { heard.Add(1) }
	})
	a := devs[1].Addr()
	deliverInOrder(t, devs, 0)
	attacks := outsiderAttacks(devs)
	before := devs[1].rejected.Load()
	want := int64(0)
	for _, ep := range []struct{ network, addr string }{{"tcp", a.VELO}, {"tcp", a.RMATCP}, {"unix", a.RMAUnix}} {
		for name, attack := range attacks {
			mount(t, ep.network, ep.addr, name, attack)
			want++
		}
	}
	msgtest.Until(t, "every attack rejected", 10*time.Second, func() bool { return devs[1].rejected.Load()-before >= want })
	if got := devs[1].rejected.Load() - before; got != want {
		t.Errorf("%d connections rejected, want %d", got, want)
	}
	if heard.Load() < want {
		t.Errorf("OnReject heard of %d rejections, want %d", heard.Load(), want)
	}
	if s := devs[1].Poll(); s != nil {
		t.Fatalf("an outsider's packet is in the mailbox: from rank %d, seq %#x", s.Src(), binary.LittleEndian.Uint32(s.Area()))
	}
	deliverInOrder(t, devs, 1000)
}

// deliverInOrder sends 20 packets, numbered from, from rank 0 to rank 1,
// which must receive them all, in order.
func deliverInOrder(t *testing.T, devs []*Device, from uint32) {
	t.Helper()
	for i := uint32(0); i < 20; i++ {
		if _, err := devs[0].Send(1, []nic.Slot{pkt(from+i, 8)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range drain(t, devs[1], 20) {
		if s.Src() != 0 || binary.LittleEndian.Uint32(s.Area()) != from+uint32(i) {
			t.Fatalf("packet %d: from rank %d, seq %d", i, s.Src(), binary.LittleEndian.Uint32(s.Area()))
		}
	}
}

// outsiderAttacks are what a process outside the job of devs tries on a
// connection to rank 1's engines, by name.
func outsiderAttacks(devs []*Device) map[string]func(c net.Conn) {
	hello := func(kind, version uint32, hash uint64) []byte {
		h := devs[0].hello(kind)
		binary.LittleEndian.PutUint32(h[4:], version)
		binary.LittleEndian.PutUint64(h[16:], hash)
		return h[:]
	}
	slots := func() []byte {
		var b []byte
		for i := range 32 {
			s := pkt(0xbad000+uint32(i), 8)
			b = append(b, s[:]...)
		}
		return b
	}
	junk := make([]byte, 4096)
	rand.Read(junk)
	return map[string]func(c net.Conn){
		"old hello then packets": func(c net.Conn) {
			c.Write(append(hello(helloVELO, 1, devs[1].jobHash()), slots()...))
		},
		"hello with a proof under another key": func(c net.Conn) {
			n := core.NewNonce()
			c.Write(append(hello(helloVELO, helloVer, devs[1].jobHash()), n[:]...))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			io.ReadFull(c, make([]byte, challengeBytes))
			p := core.NewJobKey().Prove(core.Dialer, &core.Transcript{})
			c.Write(append(p[:], slots()...))
		},
		"garbage": func(c net.Conn) { c.Write(junk) },
		"another job's hello": func(c net.Conn) {
			n := core.NewNonce()
			c.Write(append(append(hello(helloRMA, helloVer, 42), n[:]...), junk...))
		},
	}
}

// mount dials the engine at addr, makes the attack and checks that the
// engine closed the connection having said nothing but, to a well-formed
// hello, its challenge.
func mount(t *testing.T, network, addr, name string, attack func(c net.Conn)) {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s %s: %v", network, addr, err)
	}
	defer c.Close()
	attack(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, _ := io.ReadAll(c)
	if len(rest) != 0 && len(rest) != challengeBytes {
		t.Errorf("%s on %s: the engine answered %d bytes", name, addr, len(rest))
	}
}
