package netif_test

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/netif"
)

// UnpaceSockets unpaces the process's sockets on this host that its
// caller says are its own, and leaves the others as they are.
func TestUnpaceSocketsTakesTheCallersSocketsOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []*net.TCPConn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c.(*net.TCPConn), a.(*net.TCPConn))
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	cc := func(c *net.TCPConn) string {
		raw, _ := c.SyscallConn()
		var s string
		raw.Control(func(fd uintptr) { s, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
		return s
	}
	// A pacing congestion control on another connection, where the
	// kernel has one (BBR on this project's machines), shows that it was
	// left alone.
	other := ""
	for _, c := range []string{"bbr", "vegas", "htcp"} {
		raw, _ := conns[2].SyscallConn()
		var err error
		raw.Control(func(fd uintptr) { err = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, c) })
		if err == nil {
			other = c
			break
		}
	}
	// The first connection is the caller's: its dialed end by its remote
	// address, its accepted end by its local one.
	first := conns[0].LocalAddr().(*net.TCPAddr).AddrPort()
	n := netif.UnpaceSockets(func(local, remote netip.AddrPort) bool { return local == first || remote == first })
	if n != 2 {
		t.Errorf("%d sockets unpaced, want the first connection's 2", n)
	}
	for i, c := range conns[:2] {
		if got := cc(c); !slices.Contains(netif.NoPacing, got) {
			t.Errorf("end %d of the caller's connection runs %q, want one of %v", i, got, netif.NoPacing)
		}
	}
	if other != "" && cc(conns[2]) != other {
		t.Errorf("another connection's socket changed from %q to %q", other, cc(conns[2]))
	}
}
