package softrc

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/btl/netif"
	"golang.org/x/sys/unix"
)

// TestLoopbackLinksAreNotPaced: both ends of a link between two devices
// of this host run a congestion control that does not pace (netif.NoPacing),
// whatever the host's default. On a host whose default is BBR (this
// project's test machines) a link left alone paces its 1 MiB packets at
// BBR's estimate, and this fails.
func TestLoopbackLinksAreNotPaced(t *testing.T) {
	x, y := newEnd(t, endOpts{}), newEnd(t, endOpts{})
	connect(t, x, y, defaultRC())
	def, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	for _, e := range []*end{x, y} {
		e.dev.mu.Lock()
		fds := make([]int, 0, len(e.dev.links))
		for _, l := range e.dev.links {
			fds = append(fds, l.fd)
		}
		e.dev.mu.Unlock()
		if len(fds) == 0 {
			t.Fatalf("%s has no links after connecting", e.dev.Name())
		}
		for _, fd := range fds {
			if !netif.OnHost(fd) {
				t.Errorf("%s: link fd %d to 127.0.0.1 not taken for one on this host", e.dev.Name(), fd)
			}
			cc, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
			if err != nil {
				t.Fatalf("getsockopt TCP_CONGESTION: %v", err)
			}
			if !slices.Contains(netif.NoPacing, cc) {
				t.Errorf("%s: link runs %q (host default %q), want one of %v", e.dev.Name(), cc, strings.TrimSpace(string(def)), netif.NoPacing)
			}
		}
	}
}
