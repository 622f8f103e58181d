package bench

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/topo"
)

// The launch cost: how long a rank took to start, phase by phase, as
// gobtl.Init records it (core.StartupMetrics), gathered from every rank —
// what differs between gobtl run, mpirun, srun --mpi=pmix or pmi2 and
// hydra is mostly the bootstrap phase.
const initDoc = "time to Init on every rank, by phase, from the program's start: min, median, max over ranks; and each rank's binding"

func init() { Register("init", initDoc, runInit) }

// initPhases name the start-up metrics in the table, in order.
var initPhases = []struct{ metric, name string }{
	{core.MetricInitCalled, "called"},
	{core.MetricInitBootstrap, "bootstrap"},
	{core.MetricInitBTLs, "btls"},
	{core.MetricInitExchange, "exchange"},
	{core.MetricInitDone, "done"},
}

func runInit(c Comm, o Options) (*Report, error) {
	n := len(initPhases)
	mine := make([]byte, 8*(n+1))
	m := c.Metrics()
	for i, p := range initPhases {
		binary.LittleEndian.PutUint64(mine[8*i:], uint64(m.Gauge(p.metric).Load()))
	}
	// Init's own share: from the call to its return.
	done, called := m.Gauge(core.MetricInitDone).Load(), m.Gauge(core.MetricInitCalled).Load()
	if done == 0 {
		return nil, errors.New("bench: init: this communicator was not made by gobtl.Init (no start-up metrics)")
	}
	binary.LittleEndian.PutUint64(mine[8*n:], uint64(done-called))
	const tag = 0x1a17
	bind := topo.Self().String()
	if c.Rank() != 0 {
		if err := c.Send(mine, 0, tag); err != nil {
			return nil, fmt.Errorf("bench: init: %w", err)
		}
		if err := c.Send([]byte(bind), 0, tag+1); err != nil {
			return nil, fmt.Errorf("bench: init: %w", err)
		}
		return &Report{Bench: "init", Ranks: c.Size()}, c.Barrier()
	}
	binds := []string{bind}
	bbuf := make([]byte, 1024)
	// per[i][r]: phase i of rank r, in nanoseconds.
	per := make([][]int64, n+1)
	buf := make([]byte, len(mine))
	for r := range c.Size() {
		b := mine
		if r != 0 {
			if _, err := c.Recv(buf, r, tag); err != nil {
				return nil, fmt.Errorf("bench: init: %w", err)
			}
			st, err := c.Recv(bbuf, r, tag+1)
			if err != nil {
				return nil, fmt.Errorf("bench: init: %w", err)
			}
			binds = append(binds, string(bbuf[:st.Count]))
			b = buf
		}
		for i := range per {
			per[i] = append(per[i], int64(binary.LittleEndian.Uint64(b[8*i:])))
		}
	}
	if err := c.Barrier(); err != nil {
		return nil, fmt.Errorf("bench: init: %w", err)
	}
	row := Row{Size: c.Size()}
	names := make([]string, 0, n+1)
	for _, p := range initPhases {
		names = append(names, p.name)
	}
	names = append(names, "init")
	for i, vs := range per {
		slices.Sort(vs)
		ms := func(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }
		row.Fields = append(row.Fields,
			Field{names[i] + "_min_ms", ms(vs[0])}, Field{names[i] + "_median_ms", ms(vs[len(vs)/2])}, Field{names[i] + "_max_ms", ms(vs[len(vs)-1])})
	}
	rep := NewReport("init", c, o.Config)
	rep.Rows, rep.Counters, rep.RankBindings = []Row{row}, m.Snapshot(), binds
	if o.Out == nil {
		return rep, nil
	}
	if o.JSON {
		return rep, json.NewEncoder(o.Out).Encode(rep)
	}
	writeInit(o.Out, rep)
	return rep, nil
}

// writeInit prints init's table: each phase's min, median and max over
// the ranks, then where each rank runs.
func writeInit(w io.Writer, rep *Report) {
	WriteHeader(w, rep, initDoc)
	fmt.Fprintf(w, "%-34s %10s %10s %10s\n", "# Phase (ms from the program's start)", "Min", "Median", "Max")
	titles := []string{"Init called", "bootstrap up (engine)", "BTLs open, addresses put", "addresses exchanged (fence)", "Init returned", "Init itself (returned - called)"}
	for i, t := range titles {
		v := rep.Rows[0].Fields[3*i : 3*i+3]
		fmt.Fprintf(w, "%-34s %10.2f %10.2f %10.2f\n", t, v[0].Value, v[1].Value, v[2].Value)
	}
	fmt.Fprintf(w, "# Where each rank runs, as the launcher or engine bound it\n")
	for r, b := range rep.RankBindings {
		fmt.Fprintf(w, "# rank %d: %s\n", r, b)
	}
}
