package flowcontrol

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// BWOptions configure the bandwidth test of seed 000 §6.2.2: the sender
// sends Window back-to-back messages of Size bytes, the receiver answers
// once it has all of them, Iters times per window; with Blocking, both
// sides use Send and Recv, else Isend/Irecv and Waitall.
type BWOptions struct {
	Size     int
	Windows  []int
	Iters    int
	Warmup   int
	Blocking bool
}

// BWRow is one window's result, with the counters the test moved on each
// side (the sender's and the receiver's, differences over the timed
// part).
type BWRow struct {
	Window   int              `json:"window"`
	MBps     float64          `json:"mbps"`
	Sender   map[string]int64 `json:"sender"`
	Receiver map[string]int64 `json:"receiver"`
}

const (
	tagData = 1
	tagAck  = 2
	tagCtr  = 3
)

// BW runs the test between ranks 0 and 1 and prints one JSON object per
// window on rank 0's out.
func BW(c bench.Comm, o BWOptions, out io.Writer) error {
	if c.Size() < 2 {
		return fmt.Errorf("flowcontrol: the bandwidth test needs 2 ranks, the job has %d", c.Size())
	}
	if c.Rank() > 1 {
		return nil
	}
	maxW := 0
	for _, w := range o.Windows {
		if w < 1 {
			return fmt.Errorf("flowcontrol: window %d: want at least 1", w)
		}
		maxW = max(maxW, w)
	}
	t := newBWTest(c, o, maxW)
	enc := json.NewEncoder(out)
	for _, w := range o.Windows {
		el, moved, err := t.time(w)
		if err != nil {
			return err
		}
		if err := t.report(enc, w, el, moved); err != nil {
			return err
		}
	}
	return nil
}

// bwTest is one side of the bandwidth test: rank 0 sends, rank 1
// receives, into buffers and requests enough for the largest window.
type bwTest struct {
	c    bench.Comm
	o    BWOptions
	bufs [][]byte
	reqs []*pml.Request
	ack  []byte
}

func newBWTest(c bench.Comm, o BWOptions, maxW int) *bwTest {
	t := &bwTest{c: c, o: o, bufs: make([][]byte, maxW), reqs: make([]*pml.Request, maxW), ack: make([]byte, 4)}
	for i := range t.bufs {
		t.bufs[i] = make([]byte, max(o.Size, 1))[:o.Size]
	}
	return t
}

// window moves w messages: sends on rank 0, receives on rank 1.
func (t *bwTest) window(w int) error {
	c := t.c
	for i := range w {
		var r *pml.Request
		var err error
		switch {
		case t.o.Blocking && c.Rank() == 0:
			err = c.Send(t.bufs[i], 1, tagData)
		case t.o.Blocking:
			_, err = c.Recv(t.bufs[i], 0, tagData)
		case c.Rank() == 0:
			r, err = c.Isend(t.bufs[i], 1, tagData)
		default:
			r, err = c.Irecv(t.bufs[i], 0, tagData)
		}
		if err != nil {
			return err
		}
		t.reqs[i] = r
	}
	if t.o.Blocking {
		return nil
	}
	return t.c.Waitall(t.reqs[:w], nil)
}

// round is a window and the receiver's answer.
func (t *bwTest) round(w int) error {
	if err := t.window(w); err != nil {
		return err
	}
	if t.c.Rank() == 0 {
		_, err := t.c.Recv(t.ack, 1, tagAck)
		return err
	}
	return t.c.Send(t.ack, 0, tagAck)
}

// time runs the warm-up rounds of window w, then the timed ones, and
// returns how long those took and the counters they moved on this side.
func (t *bwTest) time(w int) (time.Duration, map[string]int64, error) {
	for range t.o.Warmup {
		if err := t.round(w); err != nil {
			return 0, nil, err
		}
	}
	before := flat(t.c.Metrics())
	start := time.Now()
	for range t.o.Iters {
		if err := t.round(w); err != nil {
			return 0, nil, err
		}
	}
	el := time.Since(start)
	return el, diff(flat(t.c.Metrics()), before), nil
}

// report sends the receiver's counters to rank 0, which prints window w's
// row with both sides' counters.
func (t *bwTest) report(enc *json.Encoder, w int, el time.Duration, moved map[string]int64) error {
	c := t.c
	if c.Rank() == 1 {
		b, err := json.Marshal(moved)
		if err != nil {
			return err
		}
		return c.Send(b, 0, tagCtr)
	}
	buf := make([]byte, 1<<20)
	st, err := c.Recv(buf, 1, tagCtr)
	if err != nil {
		return err
	}
	var recv map[string]int64
	if err := json.Unmarshal(buf[:st.Count], &recv); err != nil {
		return err
	}
	row := BWRow{Window: w, MBps: float64(t.o.Size) * float64(w*t.o.Iters) / el.Seconds() / 1e6, Sender: moved, Receiver: recv}
	return enc.Encode(row)
}

// flat is every counter's value and every gauge's current value.
func flat(m *core.Metrics) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m.Snapshot() {
		if n, ok := value(v); ok {
			out[k] = n
		}
	}
	return out
}

// value is a snapshot entry's number: a counter, or a gauge's current
// value (a JSON round trip makes both float64).
func value(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case float64:
		return int64(v), true
	case map[string]int64:
		return v["value"], true
	case map[string]any:
		if f, ok := v["value"].(float64); ok {
			return int64(f), true
		}
	}
	return 0, false
}

// diff is after − before for counters; gauges (whose names say so) keep
// their value after.
func diff(after, before map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(after))
	for k, v := range after {
		if isGauge(k) {
			out[k] = v
			continue
		}
		out[k] = v - before[k]
	}
	return out
}

// levels are the per-peer metrics that hold a level, not a running
// count (the RNR NAK gauges are running counts the device keeps).
var levels = []string{".posted_max.", ".posted.", ".credits.", ".backlog_wait_max_ns."}

func isGauge(name string) bool {
	for _, g := range levels {
		if strings.Contains(name, g) {
			return true
		}
	}
	return false
}
