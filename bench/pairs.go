package bench

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gobtl/gobtl/pml"
)

// pairs is the wire-up check of a job that spans hosts: every rank
// exchanges one message with every rank, itself included, at every size,
// each message's bytes checked, then rank 0 gathers every rank's counters
// so that the report shows which transport carried the traffic to each
// peer (shared memory within a node, a network BTL across nodes).
func init() {
	Register("pairs", "every rank exchanges a checked message with every rank at each size (0 B .. 8 MiB); every rank's counters", runPairs)
}

// Tags of pairs: the exchange, and the gathering of counters after it.
const (
	tagPairs       = 0x7061697
	tagPairsGather = tagPairs + 1
)

// pairsSeed names the payload of one message, so that a message
// delivered to the wrong rank, at the wrong size or in the wrong
// iteration fails the check as surely as a changed byte. The splitmix64
// finaliser spreads every field over the first byte, the only one a
// 1-byte message has.
func pairsSeed(src, dst, size, iter int) uint64 {
	x := uint64(src)<<48 ^ uint64(dst)<<32 ^ uint64(iter)<<40 ^ uint64(size)*0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// pairsStream writes (or, with check, compares against) the xorshift
// stream of seed; it returns the offset of the first differing byte, or -1.
func pairsStream(b []byte, seed uint64, check bool) int {
	x := seed | 1
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(w[:], x)
		n := min(8, len(b)-i) // the last word may be cut short
		if !check {
			copy(b[i:i+n], w[:n])
			continue
		}
		for j := range n {
			if b[i+j] != w[j] {
				return i + j
			}
		}
	}
	return -1
}

// pairsResult is what every rank sends rank 0 after the exchange.
type pairsResult struct {
	Host     string         `json:"host"`
	Counters map[string]any `json:"counters"`
}

func runPairs(c Comm, o Options) (*Report, error) {
	sizes := o.Sizes
	if len(sizes) == 0 {
		sizes = append([]int{0}, powers(1, 8<<20)...)
	}
	n, me := c.Size(), c.Rank()
	maxSize := 0
	for _, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("bench: pairs: negative size %d", s)
		}
		maxSize = max(maxSize, s)
	}
	sbuf, rbuf := make([][]byte, n), make([][]byte, n)
	for p := range n {
		sbuf[p], rbuf[p] = make([]byte, maxSize), make([]byte, maxSize)
	}
	rep := NewReport("pairs", c, o.Config)
	bar := newBar(me == 0, o.Progress, "pairs", len(sizes))
	defer bar.done()
	recvs, sends := make([]*pml.Request, n), make([]*pml.Request, n)
	for _, size := range sizes {
		iters := o.Iters
		if iters <= 0 {
			iters = bySize(10, 2, 64<<10)(size)
		}
		if err := c.Barrier(); err != nil {
			return nil, fmt.Errorf("bench: pairs: barrier: %w", err)
		}
		start := time.Now()
		for it := range iters {
			if err := pairsExchange(c, size, it, sbuf, rbuf, recvs, sends); err != nil {
				return nil, fmt.Errorf("bench: pairs: rank %d, %d bytes, exchange %d: %w", me, size, it, err)
			}
		}
		el := time.Since(start)
		per := el.Seconds() / float64(iters)
		rep.Rows = append(rep.Rows, Row{Size: size, Fields: []Field{
			{Name: "time_us", Value: per * 1e6},
			{Name: "mbps", Value: float64(size*(n-1)) / per / 1e6},
		}})
		bar.step()
	}
	// Every rank's counters once its traffic is done: the barrier lets
	// transports that publish counters from their progress loop catch up.
	if err := c.Barrier(); err != nil {
		return nil, fmt.Errorf("bench: pairs: barrier: %w", err)
	}
	rep.Counters = c.Metrics().Snapshot()
	host, _ := os.Hostname()
	all, err := Gather(c, pairsResult{Host: host, Counters: rep.Counters}, tagPairsGather)
	if err != nil {
		return nil, fmt.Errorf("bench: pairs: gather: %w", err)
	}
	if err := c.Barrier(); err != nil {
		return nil, fmt.Errorf("bench: pairs: barrier: %w", err)
	}
	if me != 0 || o.Out == nil {
		return rep, nil
	}
	for _, r := range all {
		rep.RankHosts = append(rep.RankHosts, r.Host)
		rep.RankCounters = append(rep.RankCounters, r.Counters)
	}
	bar.done()
	if o.JSON {
		return rep, json.NewEncoder(o.Out).Encode(rep)
	}
	return rep, writePairs(o.Out, rep)
}

// pairsExchange posts a receive from and a send to every rank, waits for
// all of them and checks every received message.
func pairsExchange(c Comm, size, it int, sbuf, rbuf [][]byte, recvs, sends []*pml.Request) error {
	me := c.Rank()
	var err error
	for p := range c.Size() {
		if recvs[p], err = c.Irecv(rbuf[p][:size], p, tagPairs); err != nil {
			return err
		}
	}
	for p := range c.Size() {
		pairsStream(sbuf[p][:size], pairsSeed(me, p, size, it), false)
		if sends[p], err = c.Isend(sbuf[p][:size], p, tagPairs); err != nil {
			return err
		}
	}
	for p, r := range recvs {
		st, err := c.Wait(r)
		if err != nil {
			return fmt.Errorf("receive from rank %d: %w", p, err)
		}
		if st.Count != size {
			return fmt.Errorf("rank %d's message has %d bytes, want %d", p, st.Count, size)
		}
		if i := pairsStream(rbuf[p][:size], pairsSeed(p, me, size, it), true); i >= 0 {
			return fmt.Errorf("rank %d's message differs at byte %d of %d", p, i, size)
		}
	}
	for p, r := range sends {
		if _, err := c.Wait(r); err != nil {
			return fmt.Errorf("send to rank %d: %w", p, err)
		}
	}
	return nil
}

// writePairs prints the sizes' times, then for every rank the non-zero
// counters of what it sent, per transport.
func writePairs(w io.Writer, rep *Report) error {
	WriteHeader(w, rep, Doc("pairs")+"; every message checked")
	fmt.Fprintf(w, "%-10s %16s %16s\n", "# Size", "Exchange (us)", "MB/s per rank")
	for _, r := range rep.Rows {
		t, _ := r.Get("time_us")
		bw, _ := r.Get("mbps")
		fmt.Fprintf(w, "%-10d %16.1f %16.2f\n", r.Size, t, bw)
	}
	fmt.Fprintln(w, "\n# what each rank sent, by transport (counters)")
	for rank, cs := range rep.RankCounters {
		fmt.Fprintf(w, "%-6d %-50s %14s\n", rank, "host", rep.RankHosts[rank])
		names := make([]string, 0, len(cs))
		for name, v := range cs {
			num, ok := v.(json.Number)
			if !ok || num.String() == "0" || !sentCounter(name) {
				continue
			}
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			fmt.Fprintf(w, "%-6d %-50s %14s\n", rank, name, cs[name])
		}
	}
	return nil
}

// sentCounter says whether a counter counts what a rank sent: shared
// memory's sends, a network BTL's frames and bytes (per peer too).
func sentCounter(name string) bool {
	for _, s := range []string{"_sends", "_sent", "bytes_out", "frames_out", ".frames.peer", "cma_"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}
