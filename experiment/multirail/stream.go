package multirail

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/internal/layers"
	"github.com/gobtl/gobtl/pml"
)

// StreamOptions configure one stream: rank 0 sends windows of Window
// messages of Size bytes to rank 1, which answers each window with an ack
// (osu_bw's pattern), until Duration has passed or Count messages went.
type StreamOptions struct {
	Size     int
	Window   int
	Count    int
	Duration time.Duration
	// Interval is the sampling period of bandwidth and weights.
	Interval time.Duration
	// Started, if set, is a file rank 0 creates when the stream starts,
	// for the load experiment to time its second job from.
	Started string
}

// Sample is the state of the stream at one moment.
type Sample struct {
	// Unix is the wall clock in ns (both jobs of the load experiment are
	// on one host, so their samples line up).
	Unix int64 `json:"unix"`
	// MBps is the bandwidth (10^6 B/s) over the interval that ended here
	// (rank 0's samples only).
	MBps float64 `json:"mbps,omitempty"`
	// Weights are the rank's scheduling weights toward the other rank.
	Weights []float64 `json:"weights"`
}

// StreamReport is what rank 0 prints.
type StreamReport struct {
	Size     int   `json:"size"`
	Messages int   `json:"messages"`
	Start    int64 `json:"start"`
	End      int64 `json:"end"`
	// MBps over the whole stream.
	MBps float64 `json:"mbps"`
	// Samples[r] are rank r's samples: rank 0 (the sender) has the
	// bandwidth, the rank that plans stripes the moving weights (rank 1
	// for rdma_read, which reads; rank 0 for rdma_write).
	Samples [2][]Sample `json:"samples"`
	// Counters[r] are rank r's counters at the end.
	Counters [2]map[string]any `json:"counters"`
}

const (
	tagCtl = 11 + iota
	tagData
	tagAck
	tagReport
)

// Stream runs one rank of the stream; rank 0 writes the JSON report to
// out. Ranks above 1 only take part in nothing. The samples carry the
// scheduling weights when c is a *gobtl.Comm (its PML's, reached through
// internal/layers).
func Stream(c bench.Comm, o StreamOptions, out io.Writer) error {
	if c.Size() < 2 {
		return fmt.Errorf("stream: needs 2 ranks, not %d", c.Size())
	}
	if o.Window <= 0 {
		o.Window = 16
	}
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.Count <= 0 && o.Duration <= 0 {
		return fmt.Errorf("stream: give a count or a duration")
	}
	me := c.Rank()
	if me > 1 {
		return nil
	}
	weights := func(int) []float64 { return nil }
	if p, _, ok := layers.Of(c); ok {
		weights = p.Weights
	}
	peer := 1 - me
	buf := make([]byte, o.Size)
	for i := range buf {
		buf[i] = byte(i)
	}
	reqs := make([]*pml.Request, 0, o.Window)
	var ctl, ack [8]byte
	var samples []Sample
	start := time.Now()
	if me == 0 && o.Started != "" {
		if err := os.WriteFile(o.Started, nil, 0o644); err != nil {
			return fmt.Errorf("stream: %w", err)
		}
	}
	next := start.Add(o.Interval)
	last, lastBytes := start, 0
	sent := 0
	for {
		n := o.Window
		if me == 0 {
			if o.Count > 0 {
				n = min(n, o.Count-sent)
			}
			if o.Duration > 0 && time.Since(start) >= o.Duration {
				n = 0
			}
			binary.LittleEndian.PutUint64(ctl[:], uint64(n))
			if err := c.Send(ctl[:], peer, tagCtl); err != nil {
				return err
			}
		} else {
			if _, err := c.Recv(ctl[:], peer, tagCtl); err != nil {
				return err
			}
			n = int(binary.LittleEndian.Uint64(ctl[:]))
		}
		if n == 0 {
			break
		}
		reqs = reqs[:0]
		for range n {
			var r *pml.Request
			var err error
			if me == 0 {
				r, err = c.Isend(buf, peer, tagData)
			} else {
				r, err = c.Irecv(buf, peer, tagData)
			}
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		if err := c.Waitall(reqs, nil); err != nil {
			return err
		}
		if me == 0 {
			if _, err := c.Recv(ack[:], peer, tagAck); err != nil {
				return err
			}
		} else if err := c.Send(ack[:], peer, tagAck); err != nil {
			return err
		}
		sent += n
		if now := time.Now(); !now.Before(next) {
			s := Sample{Unix: now.UnixNano(), Weights: weights(peer)}
			if me == 0 {
				s.MBps = float64((sent-lastBytes)*o.Size) / now.Sub(last).Seconds() / 1e6
			}
			samples = append(samples, s)
			last, lastBytes = now, sent
			next = next.Add((now.Sub(next)/o.Interval + 1) * o.Interval)
		}
	}
	end := time.Now()
	type rankReport struct {
		Samples  []Sample       `json:"samples"`
		Counters map[string]any `json:"counters"`
	}
	mine := rankReport{samples, c.Metrics().Snapshot()}
	if me == 1 {
		b, err := json.Marshal(mine)
		if err != nil {
			return err
		}
		var l [8]byte
		binary.LittleEndian.PutUint64(l[:], uint64(len(b)))
		if err := c.Send(l[:], peer, tagReport); err != nil {
			return err
		}
		return c.Send(b, peer, tagReport)
	}
	var l [8]byte
	if _, err := c.Recv(l[:], peer, tagReport); err != nil {
		return err
	}
	b := make([]byte, binary.LittleEndian.Uint64(l[:]))
	if _, err := c.Recv(b, peer, tagReport); err != nil {
		return err
	}
	rep := StreamReport{Size: o.Size, Messages: sent, Start: start.UnixNano(), End: end.UnixNano(),
		MBps: float64(sent*o.Size) / end.Sub(start).Seconds() / 1e6}
	var theirs rankReport
	if err := json.Unmarshal(b, &theirs); err != nil {
		return fmt.Errorf("stream: rank 1's report: %w", err)
	}
	rep.Samples = [2][]Sample{mine.Samples, theirs.Samples}
	rep.Counters = [2]map[string]any{mine.Counters, theirs.Counters}
	return json.NewEncoder(out).Encode(rep)
}
