package patterns

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// Tag is the one tag of every pattern message. One tag keeps MPI's
// non-overtaking order across all the messages of a connection, so the
// per-connection sequence number of the payload pins down which message
// must come next.
const Tag = 0x7061

// DefaultCompute is the spin of one compute phase when Options.Compute is
// zero: short, so that the run measures communication, yet the pattern
// keeps its shape (a rank is busy between receiving and sending).
const DefaultCompute = 2 * time.Microsecond

// Options shape a run. Zero fields take the pattern's defaults.
type Options struct {
	// Iters is the number of time steps (outer iterations) of the NPB
	// main loop; 0: the pattern's DefaultIters.
	Iters int
	// Scale multiplies the class A size of every message that carries
	// problem data (keys, grid faces, vectors); control-sized messages
	// (counts, norms) keep their size. Message counts do not change.
	// 0: 1, class A's sizes.
	Scale float64
	// Compute is the busy spin of each compute phase; 0: DefaultCompute;
	// negative: none.
	Compute time.Duration
	// Step, if set, is called as the rank begins each time step (a
	// progress bar's tick).
	Step func(iter int)
}

// Stats is what one rank did in a run.
type Stats struct {
	Pattern string
	Rank    int
	Size    int
	// Iters and Scale are the values the run used.
	Iters int
	Scale float64
	// Msgs[d] and Bytes[d]: the pattern's messages this rank sent to rank
	// d (the end-of-run markers are not counted).
	Msgs  []int64
	Bytes []int64
	// Recvs[s]: the messages this rank received from rank s and verified.
	Recvs []int64
	// Elapsed is the pattern on this rank, from the barrier that starts it
	// to its last completion (the end-of-run check is not included).
	Elapsed time.Duration
}

// TotalMsgs is the number of messages this rank sent.
func (s *Stats) TotalMsgs() int64 { return sum(s.Msgs) }

// TotalBytes is the number of bytes this rank sent.
func (s *Stats) TotalBytes() int64 { return sum(s.Bytes) }

func sum(v []int64) int64 {
	var t int64
	for _, x := range v {
		t += x
	}
	return t
}

// op is one posted send or receive.
type op struct {
	req  *pml.Request
	buf  []byte
	peer int
	seq  uint32
	recv bool
}

// run is one rank's state while a pattern runs: sequence numbers per
// connection, posted operations and a pool of buffers by size (a pattern
// uses a handful of sizes over and over).
type run struct {
	c       bench.Comm
	p       *Pattern
	me, n   int
	iters   int
	scale   float64
	compute time.Duration
	step    func(iter int)
	st      *Stats
	sendSeq []uint32
	recvSeq []uint32
	ops     []op
	pool    map[int][][]byte
	// phase and iter say where the pattern is, for error messages.
	phase string
	iter  int
}

func newRun(c bench.Comm, p *Pattern, o Options) (*run, error) {
	n := c.Size()
	r := &run{c: c, p: p, me: c.Rank(), n: n, iters: o.Iters, scale: o.Scale, compute: o.Compute, step: o.Step,
		sendSeq: make([]uint32, n), recvSeq: make([]uint32, n), pool: map[int][][]byte{}}
	if r.iters == 0 {
		r.iters = p.DefaultIters
	}
	if r.scale == 0 {
		r.scale = 1
	}
	switch {
	case r.compute == 0:
		r.compute = DefaultCompute
	case r.compute < 0:
		r.compute = 0
	}
	if r.iters < 0 {
		return nil, fmt.Errorf("patterns: %s: %d iterations", p.Name, r.iters)
	}
	if r.scale < 0 || math.IsNaN(r.scale) || math.IsInf(r.scale, 0) {
		return nil, fmt.Errorf("patterns: %s: scale %v: want a positive number", p.Name, r.scale)
	}
	r.st = &Stats{Pattern: p.Name, Rank: r.me, Size: n, Iters: r.iters, Scale: r.scale,
		Msgs: make([]int64, n), Bytes: make([]int64, n), Recvs: make([]int64, n)}
	return r, nil
}

// errf wraps an error with the pattern, the rank and where it is.
func (r *run) errf(format string, args ...any) error {
	return fmt.Errorf("patterns: %s: rank %d, %s, iteration %d: %w", r.p.Name, r.me, r.phase, r.iter, fmt.Errorf(format, args...))
}

// at records where the pattern is.
func (r *run) at(phase string, iter int) {
	if r.step != nil && iter != r.iter {
		r.step(iter)
	}
	r.phase, r.iter = phase, iter
}

// scaled is the size of a message of class A size bytes, scaled.
func (r *run) scaled(bytes int) int {
	return max(MinSize, int(math.Round(float64(bytes)*r.scale)))
}

func (r *run) get(n int) []byte {
	if l := r.pool[n]; len(l) > 0 {
		b := l[len(l)-1]
		r.pool[n] = l[:len(l)-1]
		return b
	}
	return make([]byte, n)
}

func (r *run) put(b []byte) { r.pool[len(b)] = append(r.pool[len(b)], b) }

// send posts the next message of size bytes to dst.
func (r *run) send(dst, size int) error {
	if err := r.post(dst, max(size, MinSize), kindData, false); err != nil {
		return err
	}
	r.st.Msgs[dst]++
	r.st.Bytes[dst] += int64(max(size, MinSize))
	return nil
}

// recv posts the receive of the next message from src, of size bytes.
func (r *run) recv(src, size int) error {
	return r.post(src, max(size, MinSize), kindData, true)
}

func (r *run) post(peer, size int, kind byte, recv bool) error {
	b := r.get(size)
	var req *pml.Request
	var err error
	var seq uint32
	if recv {
		seq = r.recvSeq[peer]
		req, err = r.c.Irecv(b, peer, Tag)
	} else {
		seq = r.sendSeq[peer]
		fill(b, r.me, peer, seq, kind)
		req, err = r.c.Isend(b, peer, Tag)
	}
	if err != nil {
		r.put(b)
		what := "send to"
		if recv {
			what = "receive from"
		}
		return r.errf("%s rank %d (%d bytes): %w", what, peer, size, err)
	}
	if recv {
		r.recvSeq[peer]++
	} else {
		r.sendSeq[peer]++
	}
	r.ops = append(r.ops, op{req: req, buf: b, peer: peer, seq: seq, recv: recv})
	return nil
}

// wait completes every posted operation, in the order posted, and checks
// each received message. kind is what the receives expect.
func (r *run) waitKind(kind byte) error {
	for i := range r.ops {
		o := &r.ops[i]
		st, err := r.c.Wait(o.req)
		if err != nil {
			r.ops = r.ops[:0]
			if o.recv && errors.Is(err, core.ErrTruncated) {
				return r.errf("from rank %d: %w (%w)", o.peer, checkLonger(o.buf, len(o.buf), o.seq, kind), err)
			}
			if o.recv {
				return r.errf("receive #%d from rank %d: %w", o.seq, o.peer, err)
			}
			return r.errf("send #%d to rank %d: %w", o.seq, o.peer, err)
		}
		if o.recv {
			if st.Source != o.peer || st.Count > len(o.buf) {
				r.ops = r.ops[:0]
				return r.errf("receive #%d from rank %d completed with source %d, %d bytes: %w", o.seq, o.peer, st.Source, st.Count, ErrCorrupt)
			}
			if err := check(o.buf[:st.Count], len(o.buf), o.peer, r.me, o.seq, kind); err != nil {
				r.ops = r.ops[:0]
				return r.errf("from rank %d: %w", o.peer, err)
			}
			if kind == kindData {
				r.st.Recvs[o.peer]++
			}
		}
		r.put(o.buf)
		o.req, o.buf = nil, nil
	}
	r.ops = r.ops[:0]
	return nil
}

// wait completes the posted operations of the pattern.
func (r *run) wait() error { return r.waitKind(kindData) }

// exchange sends size bytes to peer and receives rsize bytes from it, as
// MPI_Irecv + MPI_Send + MPI_Wait.
func (r *run) exchange(peer, size, rsize int) error {
	if err := r.recv(peer, rsize); err != nil {
		return err
	}
	if err := r.send(peer, size); err != nil {
		return err
	}
	return r.wait()
}

// spin is one compute phase.
func (r *run) spin() {
	if r.compute <= 0 {
		return
	}
	if c, ok := r.c.(bench.Computer); ok {
		c.Compute(r.compute)
		return
	}
	t := time.Now()
	for time.Since(t) < r.compute {
	}
}

// finish ends the run: every rank sends an end-of-run marker carrying its
// message count on each connection it sent on, and checks the marker of
// each connection it received on. A message lost at the very end then
// shows up as the marker arriving where the message was due (ErrLost), and
// a duplicate of the last message as a message where the marker was due
// (ErrDuplicate); the markers are not counted in Stats.
func (r *run) finish() error {
	r.at("end-of-run check", 0)
	for s := range r.n {
		if r.recvSeq[s] > 0 {
			if err := r.post(s, MinSize, kindFin, true); err != nil {
				return err
			}
		}
	}
	for d := range r.n {
		if r.sendSeq[d] > 0 {
			if err := r.post(d, MinSize, kindFin, false); err != nil {
				return err
			}
		}
	}
	return r.waitKind(kindFin)
}
