// Package extoll runs the experiments of seed 003 §5.3 and §7 on the
// EXTOLL BTL: multi-pingpong between two halves of the job (two "nodes"),
// alltoall of 2 KiB messages with all ranks or only a fraction active
// (Figures 6, 10 and 15), the multi-phase run of §7.3 (Figure 19: credits
// follow the communication pattern) and the memory of the flow-control
// structures (Equations 7–8, Table 3). Overhead is measured, as the paper
// does, against a reference run with a mailbox large enough for anything
// and no flow control.
//
// The patterns are collective functions over a communicator; they run the
// same whether the ranks are processes under `gobtl run` or goroutines of
// one process. Collective optimisations are off by construction: the
// alltoall is every rank sending to every other and then receiving, the
// stress on the mailboxes the paper wants.
package extoll

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// Spec says which pattern to run.
type Spec struct {
	// Pattern is "multipingpong", "alltoall" or "phases".
	Pattern string `json:"pattern"`
	// Size of each message in bytes (2 KiB: the size that stresses the
	// mailbox most, §5.3).
	Size   int `json:"size"`
	Iters  int `json:"iters"`
	Warmup int `json:"warmup"`
	// Active is how many ranks take part in an alltoall (0: all); the
	// others wait in a barrier (Figure 10's applications 2–4).
	Active int `json:"active,omitempty"`
	// Phases lists the active ranks of each phase of the phases pattern,
	// Iters alltoalls each.
	Phases []int `json:"phases,omitempty"`
	// Groups are the first ranks of the destination groups whose credits
	// rank 0 samples in the phases pattern (Figure 19).
	Groups []int `json:"groups,omitempty"`
	// Senders lists, per phase of the handoff pattern, the ranks that
	// send rank 0 Iters messages each.
	Senders [][]int `json:"senders,omitempty"`
}

// Outcome is what rank 0 reports.
type Outcome struct {
	Spec  Spec `json:"spec"`
	Ranks int  `json:"ranks"`
	// UsPerIter is the time of one iteration, barrier to barrier over the
	// timed iterations, in microseconds.
	UsPerIter float64 `json:"us_per_iter"`
	// Counters summed over all ranks for the timed iterations.
	Counters map[string]int64 `json:"counters"`
	// Credits[i][g] is the mean of the credits rank 0 holds toward the
	// ranks of group g after iteration i (phases pattern).
	Credits [][]float64 `json:"credits,omitempty"`
	// PhaseOf[i] is the phase of iteration i.
	PhaseOf []int `json:"phase_of,omitempty"`
}

// Counters the outcome sums over ranks (suffixes of metric names, any
// instance of the extoll BTL).
var Counters = []string{
	"fc.sends", "fc.delayed_sends", "fc.wait_ns", "fc.credit_packets", "fc.credits_in_packets",
	"fc.piggybacked_credits", "fc.piggyback_packets", "fc.monitoring_points", "fc.steals", "fc.stolen_credits",
	"fc.compulsory_requests", "fc.compulsory_responses", "fc.reclaimed_credits", "fc.threshold_clamps",
	"fc.credit_packets_deferred", "velo_blocked", "velo_stalls", "frames_out",
}

const (
	tagData   = 1
	tagGather = 2
)

// Run runs s collectively; rank 0 gets the outcome, the others nil.
func Run(c bench.Comm, s Spec) (*Outcome, error) {
	if s.Size <= 0 {
		s.Size = 2048
	}
	if s.Iters <= 0 {
		s.Iters = 10
	}
	n := c.Size()
	if s.Active <= 0 || s.Active > n {
		s.Active = n
	}
	x := &runner{c: c, s: s, send: make([]byte, s.Size), recv: make([][]byte, n)}
	for i := range x.recv {
		x.recv[i] = make([]byte, s.Size)
	}
	var iter func() error
	switch s.Pattern {
	case "multipingpong":
		if n%2 != 0 {
			return nil, fmt.Errorf("multipingpong needs an even number of ranks, not %d", n)
		}
		iter = x.pingpong
	case "alltoall":
		iter = func() error { return x.alltoall(s.Active) }
	case "phases":
		return x.phases()
	case "handoff":
		return x.handoff()
	default:
		return nil, fmt.Errorf("unknown pattern %q", s.Pattern)
	}
	for range s.Warmup {
		if err := iter(); err != nil {
			return nil, err
		}
	}
	return x.measured(&Outcome{Spec: s, Ranks: n}, s.Iters, func() error {
		for range s.Iters {
			if err := iter(); err != nil {
				return err
			}
		}
		return c.Barrier()
	})
}

type runner struct {
	c    bench.Comm
	s    Spec
	send []byte
	recv [][]byte
	reqs []*pml.Request
}

// pingpong: the first half of the ranks ping their partner in the second
// half (the 16 + 16 processes on two nodes of §5.3).
func (x *runner) pingpong() error {
	n, me := x.c.Size(), x.c.Rank()
	half := n / 2
	if me < half {
		if err := x.c.Send(x.send, me+half, tagData); err != nil {
			return err
		}
		_, err := x.c.Recv(x.recv[0], me+half, tagData)
		return err
	}
	if _, err := x.c.Recv(x.recv[0], me-half, tagData); err != nil {
		return err
	}
	return x.c.Send(x.send, me-half, tagData)
}

// alltoall: each of the first active ranks sends a message to every other
// active rank, then receives one from each; the rest do nothing (they wait
// in the next barrier).
func (x *runner) alltoall(active int) error {
	me := x.c.Rank()
	if me >= active {
		return nil
	}
	x.reqs = x.reqs[:0]
	for p := range active {
		if p == me {
			continue
		}
		r, err := x.c.Irecv(x.recv[p], p, tagData)
		if err != nil {
			return err
		}
		x.reqs = append(x.reqs, r)
	}
	for k := 1; k < active; k++ {
		p := (me + k) % active
		r, err := x.c.Isend(x.send, p, tagData)
		if err != nil {
			return err
		}
		x.reqs = append(x.reqs, r)
	}
	return x.c.Waitall(x.reqs, nil)
}

// measured runs body between barriers and returns rank 0's outcome: the
// time per iteration over iters and every rank's counters summed.
func (x *runner) measured(out *Outcome, iters int, body func() error) (*Outcome, error) {
	c := x.c
	before := counters(c.Metrics())
	if err := c.Barrier(); err != nil {
		return nil, err
	}
	// A simulated rank's communicator tells virtual time (core.Clock).
	clock := core.SystemClock
	if cl, ok := c.(core.Clock); ok {
		clock = cl
	}
	start := clock.Now()
	if err := body(); err != nil {
		return nil, err
	}
	el := clock.Now() - start
	sum, err := x.gather(diff(counters(c.Metrics()), before))
	if err != nil || c.Rank() != 0 {
		return nil, err
	}
	out.Counters = sum
	out.UsPerIter = float64(el) / 1e3 / float64(max(1, iters))
	return out, nil
}

// phases runs Iters alltoalls per phase with a barrier after each (§7.3)
// and samples rank 0's credits after every one.
func (x *runner) phases() (*Outcome, error) {
	c, s := x.c, x.s
	out := &Outcome{Spec: s, Ranks: c.Size()}
	return x.measured(out, len(s.Phases)*s.Iters, func() error {
		for ph, active := range s.Phases {
			for range s.Iters {
				if err := x.alltoall(active); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if c.Rank() == 0 {
					out.Credits = append(out.Credits, groupCredits(c.Metrics(), s.Groups, c.Size()))
					out.PhaseOf = append(out.PhaseOf, ph)
				}
			}
		}
		return nil
	})
}

// handoff is a fan-in to rank 0 whose senders change from phase to
// phase: the senders of one phase grow their quota at rank 0, then go
// quiet holding credits above what the next phase's senders leave them —
// the situation in which the dynamic scheme's compulsory credit return
// fires (seed 003 §6.5, Figure 13). A barrier ends each phase.
func (x *runner) handoff() (*Outcome, error) {
	c, s := x.c, x.s
	me := c.Rank()
	for ph, senders := range s.Senders {
		for _, p := range senders {
			if p <= 0 || p >= c.Size() {
				return nil, fmt.Errorf("handoff phase %d: sender %d is not a rank of 1..%d", ph, p, c.Size()-1)
			}
		}
	}
	return x.measured(&Outcome{Spec: s, Ranks: c.Size()}, len(s.Senders)*s.Iters, func() error {
		for _, senders := range s.Senders {
			switch {
			case me == 0:
				for range s.Iters {
					for _, p := range senders {
						if _, err := c.Recv(x.recv[p], p, tagData); err != nil {
							return err
						}
					}
				}
			case slices.Contains(senders, me):
				for range s.Iters {
					if err := c.Send(x.send, 0, tagData); err != nil {
						return err
					}
				}
			}
			if err := c.Barrier(); err != nil {
				return err
			}
		}
		return nil
	})
}

// gather sums every rank's counters at rank 0. It ends with a barrier:
// a send completes once the BTL holds the frame, and the sender must keep
// progressing until rank 0 has it.
func (x *runner) gather(mine []int64) (map[string]int64, error) {
	c := x.c
	buf := make([]byte, 8*len(Counters))
	if c.Rank() != 0 {
		for i, v := range mine {
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(v))
		}
		if err := c.Send(buf, 0, tagGather); err != nil {
			return nil, err
		}
		return nil, c.Barrier()
	}
	sum := append([]int64(nil), mine...)
	for r := 1; r < c.Size(); r++ {
		if _, err := c.Recv(buf, r, tagGather); err != nil {
			return nil, err
		}
		for i := range sum {
			sum[i] += int64(binary.LittleEndian.Uint64(buf[8*i:]))
		}
	}
	m := map[string]int64{}
	for i, name := range Counters {
		m[name] = sum[i]
	}
	return m, c.Barrier()
}

// counters reads the extoll counters from a metrics registry, summing
// over BTL instances.
func counters(m *core.Metrics) []int64 {
	out := make([]int64, len(Counters))
	for name, v := range m.Snapshot() {
		x, ok := v.(int64)
		if !ok || !strings.HasPrefix(name, "extoll.") {
			continue
		}
		for i, suffix := range Counters {
			if strings.HasSuffix(name, "."+suffix) {
				out[i] += x
			}
		}
	}
	return out
}

func diff(a, b []int64) []int64 {
	for i := range a {
		a[i] -= b[i]
	}
	return a
}

// groupCredits averages the sender-side credit gauges (extoll...fc.credits.<rank>)
// over the ranks of each group.
func groupCredits(m *core.Metrics, groups []int, n int) []float64 {
	per := make([]float64, n)
	for name, v := range m.Snapshot() {
		g, ok := v.(map[string]int64)
		i := strings.LastIndex(name, ".fc.credits.")
		if !ok || i < 0 || !strings.HasPrefix(name, "extoll.") {
			continue
		}
		r, err := strconv.Atoi(name[i+len(".fc.credits."):])
		if err == nil && r >= 0 && r < n {
			per[r] += float64(g["value"])
		}
	}
	bounds := append(append([]int(nil), groups...), n)
	sort.Ints(bounds)
	out := make([]float64, 0, len(groups))
	for gi := 0; gi+1 < len(bounds); gi++ {
		lo, hi := bounds[gi], bounds[gi+1]
		sum, cnt := 0.0, 0
		for r := lo; r < hi; r++ {
			if r == 0 {
				continue // rank 0's credits toward itself
			}
			sum += per[r]
			cnt++
		}
		if cnt > 0 {
			out = append(out, sum/float64(cnt))
		} else {
			out = append(out, 0)
		}
	}
	return out
}
