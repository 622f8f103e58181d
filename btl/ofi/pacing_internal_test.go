//go:build ofi && cgo

package ofi

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/netif"
	"github.com/gobtl/gobtl/core"
)

// TestEndpointSocketsOnThisHostAreNotPaced: once two ranks of one host
// have their sessions up, every TCP socket of their endpoints — accepted
// on one's address or connected to it — runs a congestion control that
// does not pace, whatever the host's default. On a host whose default is
// BBR (this project's test machines) the provider's sockets are left
// paced without pacing.go, and this fails.
func TestEndpointSocketsOnThisHostAreNotPaced(t *testing.T) {
	def, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	for _, prov := range []string{"tcp", "net", "sockets"} {
		t.Run(prov, func(t *testing.T) {
			needProvider(t, prov)
			j := openTestJob(t, prov, 2, nil)
			got := 0
			for _, m := range j.mods {
				m.Register(core.TypeUserBase, func(*core.Header, []byte) { got++ })
			}
			j.send(0, 1, core.Header{Type: core.TypeUserBase, Src: 0}, []byte("hi"), nil, 0)
			j.send(1, 0, core.Header{Type: core.TypeUserBase, Src: 1}, []byte("hi"), nil, 0)
			j.until("a frame each way", func() bool { return got == 2 })
			for _, m := range j.mods {
				m.nextHK = 0 // housekeeping at the next Progress
			}
			j.progress()

			mine := map[string]bool{}
			for _, m := range j.mods {
				mine[sockaddr(m.name).String()] = true
			}
			ents, err := os.ReadDir("/proc/self/fd")
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, e := range ents {
				fd, _ := strconv.Atoi(e.Name())
				if p, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || p != unix.IPPROTO_TCP {
					continue
				}
				la, err1 := unix.Getsockname(fd)
				ra, err2 := unix.Getpeername(fd)
				if err1 != nil || err2 != nil {
					continue // a listener
				}
				l, r := netif.AddrPort(la).String(), netif.AddrPort(ra).String()
				if !mine[l] && !mine[r] {
					continue
				}
				seen++
				cc, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(netif.NoPacing, cc) {
					t.Errorf("socket %s -> %s runs %q (host default %q), want one of %v", l, r, cc, strings.TrimSpace(string(def)), netif.NoPacing)
				}
			}
			if seen == 0 {
				t.Fatalf("none of the process's TCP sockets is the endpoints' (%v)", mine)
			}
			t.Logf("%d sockets of the endpoints, %d unpaced by the modules", seen, j.mods[0].unpacer.found+j.mods[1].unpacer.found)
		})
	}
}

// An endpoint address is read as the sockaddr it is, and anything else
// (shm's names, a short one) as none.
func TestSockaddrReadsInetAddressesOnly(t *testing.T) {
	in4 := []byte{2, 0, 0x1f, 0x90, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := sockaddr(in4).String(); got != "127.0.0.1:8080" {
		t.Errorf("sockaddr_in: %s", got)
	}
	in6 := make([]byte, 28)
	in6[0], in6[2], in6[3], in6[23] = 10, 0x1f, 0x91, 1
	if got := sockaddr(in6).String(); got != "[::1]:8081" {
		t.Errorf("sockaddr_in6: %s", got)
	}
	for _, b := range [][]byte{nil, []byte("fi_shm://1234"), {2, 0, 1}} {
		if a := sockaddr(b); a.IsValid() {
			t.Errorf("%q read as %s", b, a)
		}
	}
}
