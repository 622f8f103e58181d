package gobtl

import (
	"context"
	"fmt"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/topo"
)

// Where a rank runs (package internal/topo): its binding, as whoever
// started it made it — `gobtl run`, mpirun, srun; a rank never rebinds
// itself — and whether the job's ranks each own a core, which decides the
// back-off (a rank that shares its CPUs yields), shared memory's
// mechanism tables and the collectives' decision (coll.Machine). A rank's
// own mask counts for none of these: a rank bound to one core has one
// CPU, not the node's.

// ownCoreKey carries, through the bootstrap, whether a rank's node gives
// each of the job's ranks on it a core of its own.
const ownCoreKey = "gobtl.own_core"

// putOwnCore publishes this node's answer ahead of the address exchange,
// so that the exchange's fence brings it along; a job on one node needs
// none (every rank there answers alike, from the same CPUs).
func (s *start) putOwnCore() error {
	if !s.ownBoot || !core.SpansNodes(s.locality) {
		return nil
	}
	v := []byte{0}
	if s.nodeRanks() <= nodeCores(s) {
		v[0] = 1
	}
	if err := s.boot.Put(ownCoreKey, v); err != nil {
		return fmt.Errorf("gobtl: %w", err)
	}
	return nil
}

// agreeMachine sets the job's coll.Machine once the exchange's fence has
// passed: the job's ranks own their cores if every node's first rank
// says its node's do — the same answer on every rank, as the decision
// needs. Ranks in one process (RunLocal, a bootstrap of the program's
// own) keep the zero Machine: they share the process's CPUs.
func (s *start) agreeMachine(ctx context.Context) error {
	if !s.ownBoot {
		return nil
	}
	size := s.boot.Size()
	m := coll.Machine{Nodes: 1, PerNode: size, OwnCore: s.nodeRanks() <= nodeCores(s)}
	if l := s.locality; l != nil {
		m.Nodes, m.PerNode = max(l.Nodes(), 1), 0
		first := make([]int, m.Nodes) // each node's first rank, +1
		for r := range size {
			n := l.Node(r)
			m.PerNode = max(m.PerNode, core.RanksOnNode(l, r, size))
			if n >= 0 && n < len(first) && first[n] == 0 {
				first[n] = r + 1
			}
		}
		for n := 0; n < len(first) && m.Nodes > 1; n++ {
			if first[n] == 0 {
				continue
			}
			v, err := s.boot.Get(ctx, first[n]-1, ownCoreKey)
			if err != nil {
				return fmt.Errorf("gobtl: whether node %d's ranks own a core: %w", n, err)
			}
			m.OwnCore = m.OwnCore && len(v) == 1 && v[0] == 1
		}
	}
	s.machine = m
	return nil
}

// nodeCores is the number of cores the job's ranks on s's node share
// (topo.Binding.Cores); a test gives each pretend node its own.
var nodeCores = func(*start) int { return topo.Self().Cores() }

// nodeCPUs is the number of CPUs the job's ranks on this node share
// (topo.Binding.Node): what decides whether they outnumber them.
func nodeCPUs() int { return max(len(topo.Self().Node), 1) }
