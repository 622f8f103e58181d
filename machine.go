package gobtl

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/conf"
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

// fitGOMAXPROCS fits the rank's Go runtime to its binding. Go sets
// GOMAXPROCS from the affinity mask the process starts with (and, from
// Go 1.25, follows later changes of it within a second), so a rank bound
// to a one-thread core runs one P: right for a stack that moves its
// messages in the calling goroutine (self, sm), where a second P only
// adds a thread that spins for work on the rank's own CPU. A stack whose
// transports run goroutines the waiting rank depends on — the software
// devices' NIC goroutines (btl "ib" over softrc, btl "extoll"), the
// progress goroutine of rdma_read_async — needs them to run while the
// rank polls, which with one P they do only when the rank's back-off
// sleeps: such a stack gets 2 Ps. Measured on 2 loaded CPUs, two ranks
// bound, 5 alternating runs each: ib (softrc) 1 MiB latency 2077-2234 µs
// with 1 P, 690-1296 with 2 (unbound 2171-3536), 8 B 16-113 against
// 7.6-15; sm 8 B latency 0.34-2.1 µs with 1 P against 0.34-3.2 with 2,
// allreduce 8 B 1.1-5.4 against 1.9-5.5 (unbound 2.3-152 and 5-187).
// btl "ofi" has no goroutines of its own but spends long stretches in
// libfabric (a 1 MiB sendmsg inside fi_cq_read): with one P the runtime's
// monitor hands that P to another thread mid-call, and the rank's thread
// must win it back when the call returns; with a second P idle it leaves
// the P alone. bench latency over ofi/tcp, 4 alternations in both orders:
// 64 KiB 46.9-49.2 µs with 2 Ps against 49.6-52.9 with 1, 1 MiB faster in
// 3 of 4, 8 B the same. A GOMAXPROCS in the environment is the user's and
// stands. It returns what it did, for the log ("" for nothing).
func (s *start) fitGOMAXPROCS() string {
	if !s.ownBoot || os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) >= 2 {
		return ""
	}
	why := ""
	if s.cfg.Job.Protocol == conf.ProtocolRDMAReadAsync {
		why = "rdma_read_async's progress goroutine"
	}
	for _, b := range s.cfg.BTLs {
		if b.Component.Reach == core.ReachNetwork {
			why = fmt.Sprintf("btl %q (device goroutines or long provider calls)", b.Kind)
		}
	}
	if why == "" {
		return ""
	}
	runtime.GOMAXPROCS(2)
	return fmt.Sprintf("GOMAXPROCS 2 on a binding of one CPU, for %s", why)
}
