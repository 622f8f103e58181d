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
	if c.Rank() > 1 {
		return nil
	}
	s := newStream(c, o)
	if s.me == 0 && o.Started != "" {
		if err := os.WriteFile(o.Started, nil, 0o644); err != nil {
			return fmt.Errorf("stream: %w", err)
		}
	}
	for {
		n, err := s.nextWindow()
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if err := s.window(n); err != nil {
			return err
		}
		s.sent += n
		s.sample(time.Now())
	}
	return s.report(out, time.Now())
}

// stream is one side of a stream: rank 0 sends, rank 1 receives, and
// each samples its bandwidth and weights every interval.
type stream struct {
	c        bench.Comm
	o        StreamOptions
	me, peer int
	weights  func(peer int) []float64
	buf      []byte
	reqs     []*pml.Request
	ctl, ack [8]byte
	start    time.Time
	sent     int // messages
	samples  []Sample
	// next is when the next sample is due; last and lastSent are the time
	// and the count of the previous one.
	next, last time.Time
	lastSent   int
}

func newStream(c bench.Comm, o StreamOptions) *stream {
	me := c.Rank()
	s := &stream{c: c, o: o, me: me, peer: 1 - me, weights: func(int) []float64 { return nil },
		buf: make([]byte, o.Size), reqs: make([]*pml.Request, 0, o.Window)}
	if p, _, ok := layers.Of(c); ok {
		s.weights = p.Weights
	}
	for i := range s.buf {
		s.buf[i] = byte(i)
	}
	s.start = time.Now()
	s.next, s.last = s.start.Add(o.Interval), s.start
	return s
}

// nextWindow agrees on the next window's messages: the sender decides (0
// once the count has gone or the time is up) and tells the receiver.
func (s *stream) nextWindow() (int, error) {
	if s.me != 0 {
		if _, err := s.c.Recv(s.ctl[:], s.peer, tagCtl); err != nil {
			return 0, err
		}
		return int(binary.LittleEndian.Uint64(s.ctl[:])), nil
	}
	n := s.o.Window
	if s.o.Count > 0 {
		n = min(n, s.o.Count-s.sent)
	}
	if s.o.Duration > 0 && time.Since(s.start) >= s.o.Duration {
		n = 0
	}
	binary.LittleEndian.PutUint64(s.ctl[:], uint64(n))
	return n, s.c.Send(s.ctl[:], s.peer, tagCtl)
}

// window moves n messages at once and the receiver's ack.
func (s *stream) window(n int) error {
	c := s.c
	s.reqs = s.reqs[:0]
	for range n {
		var r *pml.Request
		var err error
		if s.me == 0 {
			r, err = c.Isend(s.buf, s.peer, tagData)
		} else {
			r, err = c.Irecv(s.buf, s.peer, tagData)
		}
		if err != nil {
			return err
		}
		s.reqs = append(s.reqs, r)
	}
	if err := c.Waitall(s.reqs, nil); err != nil {
		return err
	}
	if s.me == 0 {
		_, err := c.Recv(s.ack[:], s.peer, tagAck)
		return err
	}
	return c.Send(s.ack[:], s.peer, tagAck)
}

// sample takes a sample at now if one is due: the weights and, on the
// sender, the bandwidth since the last; the next is due at the first
// interval boundary after now.
func (s *stream) sample(now time.Time) {
	if now.Before(s.next) {
		return
	}
	smp := Sample{Unix: now.UnixNano(), Weights: s.weights(s.peer)}
	if s.me == 0 {
		smp.MBps = float64((s.sent-s.lastSent)*s.o.Size) / now.Sub(s.last).Seconds() / 1e6
	}
	s.samples = append(s.samples, smp)
	s.last, s.lastSent = now, s.sent
	s.next = s.next.Add((now.Sub(s.next)/s.o.Interval + 1) * s.o.Interval)
}

// rankReport is what each rank has to say at the end of a stream.
type rankReport struct {
	Samples  []Sample       `json:"samples"`
	Counters map[string]any `json:"counters"`
}

// report sends rank 1's samples and counters to rank 0, which writes the
// stream's report, with its own, to out.
func (s *stream) report(out io.Writer, end time.Time) error {
	c, peer := s.c, s.peer
	mine := rankReport{s.samples, c.Metrics().Snapshot()}
	var l [8]byte
	if s.me == 1 {
		b, err := json.Marshal(mine)
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(l[:], uint64(len(b)))
		if err := c.Send(l[:], peer, tagReport); err != nil {
			return err
		}
		return c.Send(b, peer, tagReport)
	}
	if _, err := c.Recv(l[:], peer, tagReport); err != nil {
		return err
	}
	b := make([]byte, binary.LittleEndian.Uint64(l[:]))
	if _, err := c.Recv(b, peer, tagReport); err != nil {
		return err
	}
	rep := StreamReport{Size: s.o.Size, Messages: s.sent, Start: s.start.UnixNano(), End: end.UnixNano(),
		MBps: float64(s.sent*s.o.Size) / end.Sub(s.start).Seconds() / 1e6}
	var theirs rankReport
	if err := json.Unmarshal(b, &theirs); err != nil {
		return fmt.Errorf("stream: rank 1's report: %w", err)
	}
	rep.Samples = [2][]Sample{mine.Samples, theirs.Samples}
	rep.Counters = [2]map[string]any{mine.Counters, theirs.Counters}
	return json.NewEncoder(out).Encode(rep)
}
