package ofi

import (
	"encoding/binary"
	"net/netip"

	"github.com/gobtl/gobtl/btl/netif"
)

// Sockets between two processes of one host run unpaced. The tcp, net
// and sockets providers carry a peer's bytes over TCP sockets they open
// themselves, under the host's congestion control; where that is BBR it
// paces them at its estimate of a loopback path, which it takes from the
// sockets' own bursts (netif.NoPacing says what that costs softrc's
// links). libfabric has no call that sets a socket option, so once a
// session with a peer on this host is up (its hello came, over the
// connection the provider made for the pair), housekeeping finds the
// endpoint's sockets among the process's descriptors — accepted on its
// own address, or connected to such a peer's — and sets a congestion
// control that does not pace. Sockets to other hosts keep the host's
// choice; so does every socket that is not the endpoint's.
//
// bench over ofi/tcp on loopback (a BBR host), 4 alternations of the
// binaries before and after: 1 MiB latency median 191-196 µs against
// 118-124 (minimum 112-118 both), bw 1 MiB 4892-6005 against 5782-7873
// MB/s; 8 B and 64 KiB the same. Against Open MPI's mtl/ofi on the same
// provider (bench/compare -set ofi, two quiet runs): 1 MiB latency 0.62
// and 0.68 of its, bandwidth 1.15 and 1.12 times.

// tcpSockets says whether prov's core moves data over TCP sockets.
func tcpSockets(prov string) bool {
	switch coreProvider(prov) {
	case "tcp", "net", "sockets":
		return true
	}
	return false
}

// unpacer is what a module keeps to unpace its sockets: its own address,
// its peers' on this host (nil: the provider has no TCP sockets, or its
// addresses are not inet ones), and whether a session came up since the
// last search.
type unpacer struct {
	self  netip.AddrPort
	peers map[netip.AddrPort]bool
	due   bool
	found int // sockets unpaced so far
}

func (u *unpacer) init(prov string, name []byte) {
	if !tcpSockets(prov) {
		return
	}
	if u.self = sockaddr(name); u.self.IsValid() {
		u.peers = map[netip.AddrPort]bool{}
	}
}

// sessionUp notes a session with a peer on this host, published at name.
func (u *unpacer) sessionUp(name []byte) {
	if u.peers == nil {
		return
	}
	if a := sockaddr(name); a.IsValid() {
		u.peers[a] = true
		u.due = true
	}
}

// unpace unpaces the endpoint's sockets on this host, once a session came
// up since the last call.
func (u *unpacer) unpace() {
	if !u.due {
		return
	}
	u.due = false
	u.found += netif.UnpaceSockets(func(local, remote netip.AddrPort) bool {
		return local == u.self || u.peers[remote]
	})
}

// sockaddr reads an endpoint address of format FI_SOCKADDR_IN or
// FI_SOCKADDR_IN6 (a struct sockaddr_in or sockaddr_in6, as fi_getname
// gives them); the zero AddrPort for any other.
func sockaddr(b []byte) netip.AddrPort {
	const afInet, afInet6 = 2, 10
	if len(b) < 8 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:4])
	switch binary.NativeEndian.Uint16(b[0:2]) {
	case afInet:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case afInet6:
		if len(b) >= 24 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port)
		}
	}
	return netip.AddrPort{}
}
