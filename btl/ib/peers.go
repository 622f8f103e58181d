package ib

import (
	"sync"
	"time"

	"github.com/gobtl/gobtl/core"
)

// peers are a module's endpoints, by rank and by the QPN of their QPs, and
// the lists the module keeps of them: those connecting (their CM timers
// run from housekeeping), those with frames waiting for their connection,
// those whose QP went to the error state, and those lost, to be reported
// once to the PML.
type peers struct {
	eps []*endpoint // by rank; nil until the peer is first used
	// made are the endpoints made so far, in order: what housekeeping
	// and the per-peer metrics walk instead of every rank of the job.
	// The module appends under statMu; a metrics snapshot reads them
	// from any goroutine.
	made       []*endpoint
	statMu     sync.Mutex
	byQPN      map[uint32]*endpoint
	cm         *cm
	onLost     func(int, error)
	connecting []*endpoint
	lost       []*endpoint
	// erroring are endpoints whose QP entered the error state, waiting for
	// the completion that says why (see asyncEvent).
	erroring []*endpoint
}

func (m *module) watch(e *endpoint) {
	if !e.watched {
		e.watched = true
		m.connecting = append(m.connecting, e)
	}
}

// reportLost tells the PML about lost peers, once each.
func (m *module) reportLost() int {
	lost := m.lost
	m.lost = nil
	for _, e := range lost {
		if m.onLost != nil {
			m.onLost(e.rank, e.err)
		}
	}
	return len(lost)
}

// failErroring fails the endpoints whose QP entered the error state more
// than a housekeeping interval ago without a completion saying why.
func (m *module) failErroring(now time.Duration) {
	keep := m.erroring[:0]
	for _, e := range m.erroring {
		switch {
		case e.state == epFailed:
		case now-e.errSince >= core.PolicyPollInterval:
			e.fail(e.erroring)
		default:
			keep = append(keep, e)
		}
	}
	m.erroring = keep
}

// fatal fails every peer: the module's CQ or device is gone.
func (m *module) fatal(err error) {
	m.log.Error().Err(err).Msg("module failed")
	for _, e := range m.made {
		if e.state != epIdle {
			e.fail(err)
		}
	}
}
