package multirail

import (
	"fmt"
	"sort"
	"time"

	"github.com/gobtl/gobtl/experiment"
)

// windowDelay is the extra latency of the slow rail.
const windowDelay = "50us"

// streamWindow is how many messages the stream posts at a time.
const streamWindow = 256

// windowRow is one W of the window experiment.
type windowRow struct {
	label string
	w     int // 0: binding
	ooo   float64
	msgs  int
	rate  float64 // messages per second
}

// windows are the W of the window experiment (then binding).
func (x *exp) windows() []int {
	if x.Quick {
		return []int{1, 256}
	}
	return []int{1, 4, 16, 64, 256, 1024}
}

// window: window round robin over a fast and a slow rail; out-of-order
// arrivals fall as W grows (§4.4).
func (x *exp) window() error {
	rails := []Rail{{Name: "fast", Rate: rate4x}, {Name: "slow", Rate: rate4x, Delay: windowDelay}}
	count := 50000
	if x.Quick {
		count = 5000
	}
	var rows []windowRow
	for _, wv := range append(x.windows(), 0) {
		st := Stack{Rails: rails, Policy: "window_round_robin", Params: map[string]string{"small": `"window_round_robin"`, "window": fmt.Sprint(wv)}}
		label := fmt.Sprintf("W=%d", wv)
		if wv == 0 {
			st.Policy, st.Params, label = "binding", nil, "binding"
		}
		var oooRuns []float64
		best := windowRow{label: label, w: wv}
		for rep := 0; rep < x.Repeat(); rep++ {
			x.Begin("multirail: window, %s, run %d of %d", label, rep+1, x.Repeat())
			sr, err := x.stream(st, StreamOptions{Size: 64, Window: streamWindow, Count: count, Interval: 100 * time.Millisecond})
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			// Both ranks receive (data on 1, acks and control on 0).
			var ooo float64
			for _, c := range sr.Counters {
				v, _ := c["pml.out_of_order"].(float64)
				ooo += v
			}
			oooRuns = append(oooRuns, ooo)
			best.msgs = sr.Messages
			if r := float64(sr.Messages) / (float64(sr.End-sr.Start) / 1e9); r > best.rate {
				best.rate = r
			}
		}
		sort.Float64s(oooRuns)
		best.ooo = oooRuns[len(oooRuns)/2]
		rows = append(rows, best)
	}
	w := x.Out
	fmt.Fprintf(w, "== window: window round robin over a fast rail and a slow one (+%s per packet), %d messages of 64 B\n", windowDelay, count)
	fmt.Fprintf(w, "out-of-order arrivals are the pml.out_of_order counters of both ranks (median of the runs); the stream\n")
	fmt.Fprintf(w, "posts %d messages at a time (after a control message) and waits for an ack, so the slow rail\n", streamWindow)
	fmt.Fprintf(w, "lets the fast one overtake it by as many messages as are posted during its extra delay, once\n")
	fmt.Fprintf(w, "per switch from slow to fast: about min(W, delay/interval) per 2W messages\n")
	fmt.Fprintf(w, "%-8s %14s %16s %12s\n", "policy", "out of order", "per 1000 msgs", "msgs/s")
	for _, r := range rows {
		fmt.Fprintf(w, "%-8s %14.0f %16.1f %12.0f\n", r.label, r.ooo, 1000*r.ooo/float64(max(1, r.msgs)), r.rate)
	}
	per := func(r windowRow) float64 { return 1000 * r.ooo / float64(max(1, r.msgs)) }
	first, lastW := rows[0], rows[len(rows)-2] // the smallest and the largest W (binding is last)
	fmt.Fprintf(w, "paper (§4.4, §5.2): W consecutive messages on one subchannel greatly reduce out-of-order messages on rails of different latency\n")
	fmt.Fprintf(w, "W=%d / W=%d out of order per message: %.2f   %s\n\n", lastW.w, first.w, ratio(per(lastW), per(first)),
		x.Check("window round robin", fmt.Sprintf("W=%d vs W=%d", lastW.w, first.w), "a large window reorders far fewer messages (out of order, large W / W=1)", ratio(per(lastW), per(first)), experiment.AtMost(0.5)))
	for _, r := range rows {
		x.Record("window round robin", map[string]any{"policy": r.label, "window": r.w, "out_of_order": r.ooo, "messages": r.msgs, "msgs_per_s": r.rate})
	}
	return x.plotWindow(rows)
}
