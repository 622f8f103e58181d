//go:build pmix && cgo

package pmix

/*
#include <stdint.h>
#include <pmix.h>
*/
import "C"

import (
	"fmt"
	"sync"

	"github.com/gobtl/gobtl/core"
)

// The engine's notices that a process ended (PMIx event notification,
// PMIx_Register_event_handler): Open MPI's PRRTE and Slurm's PMIx plugin
// send them to the job's other processes when a process terminates —
// without PMIx_Finalize (PMIX_ERR_PROC_TERM_WO_SYNC), aborted or killed —
// and the Client hands them to the PML (core.PeerWatcher), which fails
// its channel to that rank at once. An engine that sends none (Open MPI
// 4's ORTE, which ends the job itself) leaves the transports to notice.
// PMI-1 and PMI-2 have no such notice at all.

// watching is the Client whose notices the one handler of this process
// delivers (PMIx_Init happens once per process).
var watching struct {
	mu sync.Mutex
	c  *Client
}

//export gobtlProcEnded
func gobtlProcEnded(nspace *C.char, rank C.uint32_t, status C.int) {
	watching.mu.Lock()
	c := watching.c
	watching.mu.Unlock()
	r := int(rank)
	if c == nil || C.GoString(nspace) != c.ns || r < 0 || r >= c.size || r == c.rank {
		return
	}
	c.lost.report(r, fmt.Errorf("pmix: the engine reports rank %d ended (%s): %w", r, C.GoString(C.PMIx_Error_string(C.pmix_status_t(status))), core.ErrPeerLost))
}

// OnPeerLost installs f for the ranks the engine reports ended
// (core.PeerWatcher); f runs on a goroutine of its own, never on the
// library's progress thread, and the notices that came before are
// delivered now.
func (c *Client) OnPeerLost(f func(rank int, err error)) { c.lost.watch(f) }

// lostRanks keeps the notices until a function is installed, then hands
// each to it once per rank.
type lostRanks struct {
	mu   sync.Mutex
	f    func(int, error)
	kept []lostRank
	seen map[int]bool
}

type lostRank struct {
	rank int
	err  error
}

func (l *lostRanks) report(rank int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[rank] {
		return // one notice a rank: an engine may send several events
	}
	if l.seen == nil {
		l.seen = map[int]bool{}
	}
	l.seen[rank] = true
	if l.f == nil {
		l.kept = append(l.kept, lostRank{rank, err})
		return
	}
	go l.f(rank, err)
}

func (l *lostRanks) watch(f func(int, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f = f
	for _, k := range l.kept {
		go f(k.rank, k.err)
	}
	l.kept = nil
}
