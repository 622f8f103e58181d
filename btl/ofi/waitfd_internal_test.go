//go:build ofi && cgo

package ofi

import (
	"testing"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
)

// TestACQHasAWaitFDOnlyWhereANotifierMayUseIt: a CQ's wait fd costs
// every completion a write to its signal pipe and a read to drain it
// (tcp under rxm: 8 B latency 1.2-1.4x, 1 MiB 1.1x in bench latency),
// so a module asks for one only where it can be a core.Notifier — not on
// tcp; sockets, with its own progress thread, keeps it. Auto progress
// likewise: on tcp it is a provider thread woken at every message that
// serves no read of a rank that does not poll (openEndpoint).
func TestACQHasAWaitFDOnlyWhereANotifierMayUseIt(t *testing.T) {
	for _, c := range []struct {
		prov string
		want bool
	}{{"tcp", false}, {"sockets", true}} {
		t.Run(c.prov, func(t *testing.T) {
			j := openTestJob(t, c.prov, 1, nil)
			m := j.mods[0]
			if got := m.ep.WaitFD() >= 0; got != c.want {
				t.Errorf("%s (%s): wait fd %d, want one: %v", c.prov, m.ep.Info.Provider, m.ep.WaitFD(), c.want)
			}
			if got := m.ep.Info.DataProgress == fabric.ProgressAuto; got != c.want {
				t.Errorf("%s: data progress %s, want auto: %v", c.prov, m.ep.Info.DataProgress, c.want)
			}
			if got := m.notif != nil; got != c.want {
				t.Errorf("%s: notifier %v, want %v", c.prov, got, c.want)
			}
		})
	}
}
