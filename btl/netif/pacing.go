package netif

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// NoPacing are congestion controls that leave a socket unpaced, in order
// of preference; reno is built into every kernel and allowed to every
// user, cubic may need CAP_NET_ADMIN where it is not in
// net.ipv4.tcp_allowed_congestion_control. Unpace sets the first that
// the kernel takes (a benchmark may empty it, to measure the host's own).
//
// Why: a host whose default is BBR paces every socket at BBR's estimate
// of the path's bandwidth, and on loopback that estimate comes from the
// link's own bursts: a softrc link carrying 1 MiB read responses settled
// at 34.6 Gb/s (ss -ti), at which a 1 MiB packet takes 243 µs to leave —
// Open MPI's ob1/tcp moves 1 MiB one way in 124. Between two sockets of
// one host, 207-458 of 3,000 1 MiB writes under BBR left 230-600 KB
// each in the socket unsent (SIOCOUTQNSD right after the write), under
// cubic or reno none but the first (the initial window). Loopback has no
// queue to protect and no loss to avoid; unpaced, a write hands its bytes
// to the receiving socket in the same system call. Between hosts the
// administrator's choice stands.
var NoPacing = []string{"cubic", "reno"}

// OnHost says whether fd is a socket connected to an address of this
// host, so that its packets never leave the loopback device.
func OnHost(fd int) bool {
	la, err := unix.Getsockname(fd)
	if err != nil {
		return false
	}
	ra, err := unix.Getpeername(fd)
	if err != nil {
		return false
	}
	l, r := sockaddrIP(la), sockaddrIP(ra)
	return r != nil && (r.IsLoopback() || r.Equal(l))
}

// Unpace sets a congestion control of NoPacing on fd, a TCP socket,
// unless it runs one already; it reports whether fd runs one now.
func Unpace(fd int) bool {
	if cc, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION); err == nil && slices.Contains(NoPacing, cc) {
		return true
	}
	for _, cc := range NoPacing {
		if unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) == nil {
			return true
		}
	}
	return false
}

// UnpaceSockets unpaces the process's TCP sockets that are connected to
// an address of this host and that mine says are its caller's, given
// their local and remote addresses: for a transport whose sockets a
// library opens (btl ofi's, libfabric's tcp and sockets providers), which
// finds them among the process's descriptors. It returns how many it
// unpaced.
func UnpaceSockets(mine func(local, remote netip.AddrPort) bool) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || p != unix.IPPROTO_TCP {
			continue
		}
		la, err1 := unix.Getsockname(fd)
		ra, err2 := unix.Getpeername(fd)
		if err1 != nil || err2 != nil || !OnHost(fd) || !mine(AddrPort(la), AddrPort(ra)) {
			continue
		}
		if Unpace(fd) {
			n++
		}
	}
	return n
}

// AddrPort is an inet socket address as a netip.AddrPort (IPv4 addresses
// unmapped), the zero AddrPort for any other.
func AddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// sockaddrIP is the IP of an inet socket address, nil for any other.
func sockaddrIP(sa unix.Sockaddr) net.IP {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.IP(a.Addr[:])
	case *unix.SockaddrInet6:
		return net.IP(a.Addr[:])
	}
	return nil
}
