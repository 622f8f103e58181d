package boot

import (
	"context"
	"fmt"
	"sync"

	"github.com/gobtl/gobtl/core"
)

// Group returns the bootstraps of an n-rank job whose ranks all live in
// this process (tests, in-process fabrics), all on one node. Fence is a
// real barrier: it returns when all n have called it, or fails when ctx
// ends or a member was closed. The group holds a fresh job key
// (core.JobKeyer): its members share memory, so no exchange is needed.
func Group(n int, jobID string) []core.Bootstrap {
	return GroupOn(jobID, core.OneNode(n))
}

// GroupOn is Group for a job whose ranks the bootstraps' Locality places
// on nodes: rank r on nodes[r] (core.NewNodeMap numbers them). Tests use
// it to make one process look like a job across hosts.
func GroupOn(jobID string, nodes core.NodeMap) []core.Bootstrap {
	n := len(nodes)
	g := &group{size: n, job: jobID, nodes: nodes, key: core.NewJobKey(), kv: make([]map[string][]byte, n), in: make([]bool, n), round: &round{done: make(chan struct{})}}
	out := make([]core.Bootstrap, n)
	for r := range n {
		g.kv[r] = map[string][]byte{}
		out[r] = &member{g: g, rank: r}
	}
	return out
}

type group struct {
	size  int
	job   string
	nodes core.NodeMap
	key   *core.JobKey

	mu      sync.Mutex
	kv      []map[string][]byte // visible after a fence
	staged  []stagedPut         // put since the last fence
	in      []bool              // the ranks in the current fence
	arrived int                 // how many of in are true
	round   *round
	failed  error
}

// round is one fence; done closes when it completes or fails (err).
type round struct {
	done chan struct{}
	err  error
}

type stagedPut struct {
	rank  int
	key   string
	value []byte
}

type member struct {
	g    *group
	rank int
	mine map[string][]byte
}

func (m *member) Rank() int     { return m.rank }
func (m *member) Size() int     { return m.g.size }
func (m *member) JobID() string { return m.g.job }

// Node is the node of rank (core.Locality).
func (m *member) Node(rank int) int { return m.g.nodes.Node(rank) }

// Nodes is the number of nodes (core.Locality).
func (m *member) Nodes() int { return m.g.nodes.Nodes() }

// JobKey is the group's secret (core.JobKeyer).
func (m *member) JobKey() *core.JobKey { return m.g.key }

func (m *member) Put(key string, value []byte) error {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed != nil {
		return g.failed
	}
	v := append([]byte(nil), value...)
	if m.mine == nil {
		m.mine = map[string][]byte{}
	}
	m.mine[key] = v
	g.staged = append(g.staged, stagedPut{m.rank, key, v})
	return nil
}

func (m *member) Fence(ctx context.Context) error {
	g := m.g
	g.mu.Lock()
	if g.failed != nil {
		g.mu.Unlock()
		return g.failed
	}
	// A fence counts ranks, not calls: a rank's second call while it is
	// in the fence is a mistake, and counted it would complete the round
	// without another rank — or leave a call alone in the next round,
	// waiting forever.
	if g.in[m.rank] {
		g.mu.Unlock()
		return fmt.Errorf("boot: rank %d is already in this fence: a rank enters each fence once", m.rank)
	}
	r := g.round
	g.in[m.rank] = true
	g.arrived++
	if g.arrived == g.size {
		for _, p := range g.staged {
			g.kv[p.rank][p.key] = p.value
		}
		g.staged, g.arrived = nil, 0
		clear(g.in)
		g.round = &round{done: make(chan struct{})}
		close(r.done)
		g.mu.Unlock()
		return nil
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		g.fail(fmt.Errorf("boot: rank %d left a fence: %w", m.rank, ctx.Err()))
		return ctx.Err()
	}
}

func (m *member) Get(ctx context.Context, rank int, key string) ([]byte, error) {
	g := m.g
	if rank < 0 || rank >= g.size {
		return nil, fmt.Errorf("boot: get %q: rank %d is out of range [0,%d)", key, rank, g.size)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if rank == m.rank {
		if v, ok := m.mine[key]; ok {
			return v, nil
		}
	}
	v, ok := g.kv[rank][key]
	if !ok {
		return nil, fmt.Errorf("boot: rank %d has not published %q (before the last fence)", rank, key)
	}
	return v, nil
}

// Close fails the fences of the group: a member that goes away can never
// fence again.
func (m *member) Close() error {
	m.g.fail(fmt.Errorf("boot: rank %d closed: %w", m.rank, core.ErrPeerLost))
	return nil
}

func (g *group) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed == nil {
		g.failed = err
		g.round.err = err
		close(g.round.done)
	}
}
