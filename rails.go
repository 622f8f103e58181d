package gobtl

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/core"
)

// A scheduling policy is set up once per peer, when the PML makes the
// peer's virtual channel — at the first message to it. A policy that
// refuses the job's rails (weights = [4, 1, 7] for two rails) would then
// fail that first message as a lost peer ("peer lost: ... 3 weights for
// the 2 subchannels"), on the ranks that send one, long after the start.
// So the start makes the channels of one peer of each kind — this rank,
// a rank on its node, a rank on another node: every shape of rails the
// job has — and a refusal is a configuration error at the policy's
// block, from every rank's Init, as `gobtl config check` reports it.

// checkRails is the start's step after the PML: the scheduling policy
// sets up the channel of one peer of each kind (railPeers). A channel it
// cannot make is not logged as a lost peer: a refusal is the start's
// error, anything else the first message's.
func (s *start) checkRails(context.Context) error {
	if s.sched == nil {
		return nil
	}
	s.probe.on.Store(true)
	for _, r := range railPeers(s.boot.Rank(), s.boot.Size(), s.locality) {
		s.comm.Weights(r) // makes the channel, as a first message would
	}
	s.probe.on.Store(false)
	var refused *setupRefused
	if err := s.comm.Lost(); !errors.As(err, &refused) {
		return nil // a transport's failure is the first message's to report
	}
	p := s.cfg.Policy(core.KindSched)
	if p == nil {
		return fmt.Errorf("gobtl: the scheduling policy refused the job's rails: %w", refused.err)
	}
	return fmt.Errorf("gobtl: %w", startError(p.DeclRange,
		fmt.Sprintf("The scheduling policy %q refused the job's rails", p.Name), refused.err))
}

// railPeers are rank's peers of each kind: rank itself, the next rank on
// its node and the next on another node (loc nil: one node).
func railPeers(rank, size int, loc core.Locality) []int {
	peers := []int{rank}
	local, remote := false, loc == nil
	for i := 1; i < size && !(local && remote); i++ {
		r := (rank + i) % size
		switch same := loc == nil || loc.Node(r) == loc.Node(rank); {
		case same && !local:
			peers, local = append(peers, r), true
		case !same && !remote:
			peers, remote = append(peers, r), true
		}
	}
	return peers
}

// refusals is the job's scheduling policy, its refusals of a Setup marked
// (setupRefused) so that checkRails tells them from a transport's failure
// in the lost channel's error.
type refusals struct{ core.Scheduler }

// Setup implements core.Scheduler.
func (r refusals) Setup(info core.SchedInfo) (core.SchedSetup, error) {
	s, err := r.Scheduler.Setup(info)
	if err != nil {
		err = &setupRefused{err: err}
	}
	return s, err
}

// setupRefused is a scheduling policy's refusal of a peer's rails.
type setupRefused struct{ err error }

func (e *setupRefused) Error() string { return e.err.Error() }
func (e *setupRefused) Unwrap() error { return e.err }

// probeHook drops the PML's "peer lost" log lines while on.
type probeHook struct{ on atomic.Bool }

// Run implements zerolog.Hook.
func (h *probeHook) Run(e *zerolog.Event, _ zerolog.Level, msg string) {
	if msg == "peer lost" && h.on.Load() {
		e.Discard()
	}
}
