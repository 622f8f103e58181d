//go:build ofi && cgo

package ofi

import (
	"slices"
	"strconv"
	"sync"

	"github.com/gobtl/gobtl/core"
)

// peerStats are what a module moved to or from one peer: data frames
// and their bytes (headers included) sent to it, bytes written into its
// memory (Put) and read from it (Get). They are named
// ofi.<instance>.<domain>.<counter>.peer<rank> only when a snapshot is
// taken, as btl/ib's per-peer counters are: a name for every rank of a
// large job would cost memory before a frame was sent. The two-host test
// reads them to prove which traffic crossed the fabric.
type peerStats struct {
	frames, bytes, written, read core.Counter
}

// peerMetrics keeps the peers a module has made for the snapshot's
// collector, which runs on whatever goroutine asks for a snapshot.
type peerMetrics struct {
	mu     sync.Mutex
	made   []*peer
	prefix string
}

func newPeerMetrics(met *core.Metrics, prefix string) *peerMetrics {
	pm := &peerMetrics{prefix: prefix + "."}
	met.Collect(pm.collect)
	return pm
}

// add makes p's counters part of the module's snapshots.
func (pm *peerMetrics) add(p *peer) {
	pm.mu.Lock()
	pm.made = append(pm.made, p)
	pm.mu.Unlock()
}

func (pm *peerMetrics) collect(add func(name string, metric any)) {
	pm.mu.Lock()
	peers := slices.Clone(pm.made)
	pm.mu.Unlock()
	for _, p := range peers {
		r := ".peer" + strconv.Itoa(p.rank)
		add(pm.prefix+"frames_sent"+r, &p.ps.frames)
		add(pm.prefix+"bytes_sent"+r, &p.ps.bytes)
		add(pm.prefix+"rdma_written"+r, &p.ps.written)
		add(pm.prefix+"rdma_read"+r, &p.ps.read)
	}
}
