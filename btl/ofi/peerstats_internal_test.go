//go:build ofi && cgo

package ofi

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

// A module's per-peer counters say exactly what went to which peer:
// frames and their bytes sent, bytes written and read by RDMA; a peer
// nothing went to has none (the two-host test proves by them that only
// cross-host traffic took the fabric).
func TestPerPeerCountersSayWhatWentToWhichPeer(t *testing.T) {
	j := openTestJob(t, "tcp", 3, nil)
	got := 0
	j.mods[1].Register(core.TypeEager, func(*core.Header, []byte) { got++ })
	const frames, pre, data = 5, 16, 100
	for range frames {
		j.send(0, 1, core.Header{Type: core.TypeEager}, make([]byte, pre), make([]byte, data), 0)
	}
	j.until("the frames", func() bool { return got == frames })
	remote := make([]byte, 64<<10)
	rrg, err := j.mods[1].RegisterMem(remote, core.AccessRemoteWrite|core.AccessRemoteRead|core.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	local := make([]byte, 48<<10)
	lrg, err := j.mods[0].RegisterMem(local, core.AccessLocalWrite|core.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		n   int
		put bool
	}{{48 << 10, true}, {20 << 10, false}, {7, false}} {
		done := false
		j.rdma(0, 1, &core.RDMAOp{Local: local[:op.n], Region: lrg, Remote: rrg.Key(), Done: doneFunc(func(_ *core.RDMAOp, err error) {
			if err != nil {
				t.Errorf("rdma: %v", err)
			}
			done = true
		})}, op.put)
		j.until("the rdma", func() bool { return done })
	}
	want := map[string]int64{
		"frames_sent.peer1": frames, "bytes_sent.peer1": frames * (core.HeaderSize + pre + data),
		"rdma_written.peer1": 48 << 10, "rdma_read.peer1": 20<<10 + 7,
	}
	snap := j.met[0].Snapshot()
	for name, n := range want {
		full := core.MetricName(Name, j.mods[0].cfg.instance, j.mods[0].ep.Info.Domain, name)
		if v, ok := snap[full]; !ok || v.(int64) != n {
			t.Errorf("%s = %v, want %d", full, snap[full], n)
		}
	}
	for name, v := range snap {
		if n, ok := v.(int64); ok && n != 0 && len(name) > 6 && name[len(name)-6:] == ".peer2" {
			t.Errorf("%s = %d, but nothing went to rank 2", name, n)
		}
	}
}
