package ib

import (
	"sync"
	"time"

	"github.com/gobtl/gobtl/core"
)

// peers are a module's endpoints, by rank and by the QPN of their QPs, and
// the lists the module keeps of them: those whose QP went to the error
// state, and those lost, to be reported once to the PML. (Those
// connecting are the connection manager's, those with frames waiting for
// their connection the send side's.)
type peers struct {
	eps []*endpoint // by rank; nil until the peer is first used
	// made are the endpoints made so far, in order: what housekeeping
	// and the per-peer metrics walk instead of every rank of the job.
	// The module appends under statMu; a metrics snapshot reads them
	// from any goroutine.
	made   []*endpoint
	statMu sync.Mutex
	byQPN  map[uint32]*endpoint
	onLost func(int, error)
	lost   []*endpoint
	// erroring are endpoints whose QP entered the error state, waiting for
	// the completion that says why (see asyncEvent).
	erroring []*endpoint
}

// reportLost tells the PML about lost peers, once each.
func (p *peers) reportLost() int {
	lost := p.lost
	p.lost = nil
	for _, e := range lost {
		if p.onLost != nil {
			p.onLost(e.rank, e.err)
		}
	}
	return len(lost)
}

// failErroring fails the endpoints whose QP entered the error state more
// than a housekeeping interval ago without a completion saying why.
func (p *peers) failErroring(now time.Duration) {
	keep := p.erroring[:0]
	for _, e := range p.erroring {
		switch {
		case e.state == epFailed:
		case now-e.errSince >= core.PolicyPollInterval:
			e.fail(e.erroring)
		default:
			keep = append(keep, e)
		}
	}
	p.erroring = keep
}

// fatal fails every peer: the module's CQ or device is gone.
func (m *module) fatal(err error) {
	m.log.Error().Err(err).Msg("module failed")
	for _, e := range m.peers.made {
		if e.state != epIdle {
			e.fail(err)
		}
	}
}

// unacknowledged says whether a peer not lost has work requests of ours
// outstanding: frames not yet acknowledged, RDMA not completed.
func (p *peers) unacknowledged() bool {
	for _, e := range p.made {
		if e.state != epFailed && e.tx.outstanding() {
			return true
		}
	}
	return false
}

// undelivered says whether a peer not lost has frames waiting on its
// endpoint: for its connection, or for credits once connected.
func (p *peers) undelivered() bool {
	for _, e := range p.made {
		if len(e.tx.pending) > 0 && e.state != epFailed {
			return true
		}
	}
	return false
}
