package patterns

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gobtl/gobtl/bench"
)

// Every pattern is a benchmark of the suite: `gobtl bench lu`.
func init() {
	for _, p := range all {
		bench.Register(p.Name, p.Doc, func(c bench.Comm, o bench.Options) (*bench.Report, error) { return runBench(c, p, o) })
	}
}

// tagLength is the first of the gathering's two tags after a pattern
// (bench.Gather; the pattern's own messages all go on Tag).
const tagLength = 3

// rankResult is what every rank sends rank 0 after a pattern: its stats and
// its counters, snapshot as soon as its part of the pattern (and the
// end-of-run check) is done, before any gathering traffic.
type rankResult struct {
	ElapsedNS int64          `json:"elapsed_ns"`
	Msgs      []int64        `json:"msgs"`
	Bytes     []int64        `json:"bytes"`
	Counters  map[string]any `json:"counters"`
}

// runBench runs one of the NPB patterns (seed 000 §6.3) as a benchmark
// and reports one row, the message matrices and every rank's counters.
func runBench(c bench.Comm, p *Pattern, o bench.Options) (*bench.Report, error) {
	if len(o.Sizes) > 0 {
		return nil, fmt.Errorf("bench: %s is a communication pattern: it takes iterations and a scale, not sizes", p.Name)
	}
	rep := bench.NewReport(p.Name, c, o.Config)
	st, err := p.Run(c, Options{Iters: o.Iters, Scale: o.Scale, Compute: o.Compute})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	mine := rankResult{ElapsedNS: int64(st.Elapsed), Msgs: st.Msgs, Bytes: st.Bytes, Counters: c.Metrics().Snapshot()}
	all, err := gatherResults(c, mine)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: gather: %w", p.Name, err)
	}
	if err := c.Barrier(); err != nil {
		return nil, fmt.Errorf("bench: barrier: %w", err)
	}
	compute := o.Compute
	switch {
	case compute == 0:
		compute = DefaultCompute
	case compute < 0:
		compute = 0
	}
	rep.Config["iters"], rep.Config["scale"], rep.Config["compute"] = st.Iters, st.Scale, compute.String()
	rep.Counters = mine.Counters
	if c.Rank() != 0 {
		return rep, nil
	}
	rep.Rows = []bench.Row{patternRow(all, st)}
	for _, r := range all {
		rep.RankMsgs = append(rep.RankMsgs, r.Msgs)
		rep.RankBytes = append(rep.RankBytes, r.Bytes)
		rep.RankCounters = append(rep.RankCounters, r.Counters)
	}
	if o.Out == nil {
		return rep, nil
	}
	if o.JSON {
		return rep, json.NewEncoder(o.Out).Encode(rep)
	}
	return rep, writePatternTable(o.Out, rep, p)
}

// patternRow sums up a run: the timed part (the slowest rank's, and the
// mean), application messages and bytes (a rank's messages to itself
// included, as CG's diagonal ranks send them), and messages per
// connection (ordered pairs of distinct ranks that carried any).
func patternRow(all []rankResult, st *Stats) bench.Row {
	var maxNS, sumNS, msgs, bytes, conns, connMsgs, maxConn int64
	for s, r := range all {
		maxNS = max(maxNS, r.ElapsedNS)
		sumNS += r.ElapsedNS
		for d, m := range r.Msgs {
			msgs += m
			bytes += r.Bytes[d]
			if d != s && m > 0 {
				conns++
				connMsgs += m
				maxConn = max(maxConn, m)
			}
		}
	}
	perConn, size := 0.0, 0
	if conns > 0 {
		perConn = float64(connMsgs) / float64(conns)
	}
	if msgs > 0 {
		size = int(bytes / msgs)
	}
	return bench.Row{Size: size, Fields: []bench.Field{
		{Name: "time_us", Value: float64(maxNS) / 1e3},
		{Name: "time_mean_us", Value: float64(sumNS) / float64(len(all)) / 1e3},
		{Name: "msgs", Value: float64(msgs)},
		{Name: "bytes", Value: float64(bytes)},
		{Name: "conns", Value: float64(conns)},
		{Name: "msgs_per_conn", Value: perConn},
		{Name: "max_conn_msgs", Value: float64(maxConn)},
		{Name: "iters", Value: float64(st.Iters)},
		{Name: "scale", Value: st.Scale},
	}}
}

// gatherResults collects every rank's result at rank 0, in rank order.
func gatherResults(c bench.Comm, mine rankResult) ([]rankResult, error) {
	all, err := bench.Gather(c, mine, tagLength)
	if err != nil {
		return nil, err
	}
	for r, res := range all {
		if len(res.Msgs) != c.Size() || len(res.Bytes) != c.Size() {
			return nil, fmt.Errorf("rank %d reports %d destinations, the job has %d ranks", r, len(res.Msgs), c.Size())
		}
	}
	return all, nil
}

// writePatternTable prints a pattern's report: its totals, the
// rank-to-rank message matrix and the counters of all ranks.
func writePatternTable(w io.Writer, rep *bench.Report, p *Pattern) error {
	bench.WriteHeader(w, rep, fmt.Sprintf("%s (seed 000 §6.3; class A runs %d iterations)", p.Doc, p.ClassAIters))
	writeTotals(w, rep.Rows[0])
	writeMessageMatrix(w, rep.Ranks, rep.RankMsgs)
	writeCounters(w, sumCounters(rep.RankCounters))
	return nil
}

// writeTotals prints the run's one row: time, messages, bytes and how
// they spread over the connections.
func writeTotals(w io.Writer, row bench.Row) {
	type column struct{ field, title, format string }
	cols := []column{{"time_us", "Time (us)", "%.0f"}, {"msgs", "Messages", "%.0f"}, {"bytes", "Bytes", "%.0f"},
		{"conns", "Connections", "%.0f"}, {"msgs_per_conn", "Msgs/conn", "%.1f"}, {"max_conn_msgs", "Max msgs/conn", "%.0f"}}
	for _, c := range cols {
		fmt.Fprintf(w, " %14s", c.title)
	}
	fmt.Fprintln(w)
	for _, c := range cols {
		v, _ := row.Get(c.field)
		fmt.Fprintf(w, " %14s", fmt.Sprintf(c.format, v))
	}
	fmt.Fprintln(w)
}

// writeMessageMatrix prints msgs[s][d], the application messages rank s
// sent rank d, a dot where there were none.
func writeMessageMatrix(w io.Writer, ranks int, msgs [][]int64) {
	fmt.Fprintln(w, "\n# application messages, rank (row) to rank (column)")
	fmt.Fprintf(w, "%6s", "#")
	for d := range ranks {
		fmt.Fprintf(w, " %7d", d)
	}
	fmt.Fprintln(w)
	for s, row := range msgs {
		fmt.Fprintf(w, "%6d", s)
		for _, m := range row {
			if m == 0 {
				fmt.Fprintf(w, " %7s", ".")
			} else {
				fmt.Fprintf(w, " %7d", m)
			}
		}
		fmt.Fprintln(w)
	}
}

// counterTotal is one counter name over all ranks: a counter's sum and
// largest value, or (gauge) a gauge's largest maximum.
type counterTotal struct {
	sum, max int64
	gauge    bool
}

// sumCounters adds up the ranks' counters by name, the per-peer ones
// folded into one name (foldPeer).
func sumCounters(ranks []map[string]any) map[string]*counterTotal {
	tot := map[string]*counterTotal{}
	for _, cs := range ranks {
		for name, v := range cs {
			name = foldPeer(name)
			a := tot[name]
			if a == nil {
				a = &counterTotal{}
				tot[name] = a
			}
			switch v := v.(type) {
			case json.Number:
				n, _ := v.Int64()
				a.sum += n
				a.max = max(a.max, n)
			case map[string]any:
				if m, ok := v["max"].(json.Number); ok {
					n, _ := m.Int64()
					a.gauge, a.max = true, max(a.max, n)
				}
			}
		}
	}
	return tot
}

// writeCounters prints the totals by name, leaving out those that stayed
// zero.
func writeCounters(w io.Writer, tot map[string]*counterTotal) {
	names := make([]string, 0, len(tot))
	for n, a := range tot {
		if a.sum != 0 || a.max != 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) > 0 {
		fmt.Fprintln(w, "\n# counters of all ranks: counters summed (and the largest per rank and peer), gauges' largest maximum")
	}
	for _, n := range names {
		a := tot[n]
		if a.gauge {
			fmt.Fprintf(w, "%-50s %14s %14d\n", n, "max", a.max)
		} else {
			fmt.Fprintf(w, "%-50s %14d %14d\n", n, a.sum, a.max)
		}
	}
}

// foldPeer turns a per-peer metric name ("ib.rail0.posted.peer3",
// "extoll.fc.credits.3") into its family ("ib.rail0.posted.peer*").
func foldPeer(name string) string {
	i := strings.LastIndexByte(name, '.')
	last := strings.TrimPrefix(name[i+1:], "peer")
	if i < 0 || last == "" || strings.Trim(last, "0123456789") != "" {
		return name
	}
	return name[:len(name)-len(last)] + "*"
}
