package gobtl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/btl/netif"
	"github.com/gobtl/gobtl/core"
)

// pairs has every rank exchange a small, a medium and a large message
// with every other, both ways at once, and check them.
func pairs(c *Comm) error {
	me, n := c.Rank(), c.Size()
	for _, size := range []int{100, 64 << 10, 1 << 20} {
		var reqs []*Request
		in := make([][]byte, n)
		for p := range n {
			if p == me {
				continue
			}
			in[p] = make([]byte, size)
			r, err := c.Irecv(in[p], p, size)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
			r, err = c.Isend(bytes.Repeat([]byte{byte(me*16 + p)}, size), p, size)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		if err := c.Waitall(reqs, nil); err != nil {
			return err
		}
		for p := range n {
			if p != me && !bytes.Equal(in[p], bytes.Repeat([]byte{byte(p*16 + me)}, size)) {
				return fmt.Errorf("rank %d: the %d-byte message from rank %d is wrong", me, size, p)
			}
		}
	}
	return c.Barrier()
}

// The default stack on a job the engine places on two nodes: shared
// memory between the ranks of a node, InfiniBand (softrc) between nodes —
// which each module's counters show — and on one node no network at all.
func TestTheDefaultStackUsesSharedMemoryWithinANodeAndTheNetworkAcross(t *testing.T) {
	if _, err := netif.Select(netif.Choice{Spans: true}); err != nil {
		t.Skipf("no interface but loopback is up, so a job across nodes has no address to publish: %v", err)
	}
	for _, tc := range []struct {
		name  string
		nodes core.NodeMap
	}{
		{"two nodes of two ranks", core.NodeMap{0, 0, 1, 1}},
		{"ranks of two nodes interleaved", core.NodeMap{0, 1, 0, 1}},
		{"one node", core.NodeMap{0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			boots := boot.GroupOn(fmt.Sprintf("loc-%d-%d", os.Getpid(), localJobs.Add(1)), tc.nodes)
			var mu sync.Mutex
			metrics := make([]*core.Metrics, len(boots))
			err := runLocal(ctx, boots, Options{}, false, func(c *Comm) error {
				mu.Lock()
				metrics[c.Rank()] = c.Metrics()
				mu.Unlock()
				return pairs(c)
			})
			if err != nil {
				t.Fatal(err)
			}
			// The modules publish some counters only at Close, so they are
			// read once every rank has closed.
			for me, m := range metrics {
				snap := m.Snapshot()
				count := func(name string) int64 { v, _ := snap[name].(int64); return v }
				smSends := count("sm.local.fastbox_sends") + count("sm.local.fifo_sends")
				local := false
				for p := range tc.nodes {
					if p == me {
						continue
					}
					ib := count(fmt.Sprintf("ib.net.frames.peer%d", p))
					switch same := tc.nodes[p] == tc.nodes[me]; {
					case same && ib != 0:
						t.Errorf("rank %d sent %d frames to rank %d, on its node, over ib", me, ib, p)
					case !same && ib == 0:
						t.Errorf("rank %d sent nothing to rank %d, on another node, over ib", me, p)
					}
					local = local || tc.nodes[p] == tc.nodes[me]
				}
				if local && smSends == 0 {
					t.Errorf("rank %d has a peer on its node but sent nothing through shared memory", me)
				}
				if tc.nodes.Nodes() == 1 {
					for name := range snap {
						if strings.HasPrefix(name, "ib.") {
							t.Errorf("rank %d of a one-node job opened ib (%s)", me, name)
							break
						}
					}
				}
			}
		})
	}
}
