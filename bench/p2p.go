package bench

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gobtl/gobtl/pml"
)

// Tags: data and acks never match each other, nor a result message.
const (
	tagData   = 1
	tagAck    = 2
	tagResult = 3
)

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pingpong runs warmup+iters round trips between me and peer (the lower
// rank sends first) and returns the timed part.
func (b *runner) pingpong(me, peer, n int) (time.Duration, error) {
	c := b.c
	s, r := b.sbuf[:n], b.rbuf[:n]
	for i := 0; i < b.warmup+b.iters; i++ {
		b.lap(i)
		if me < peer {
			if err := c.Send(s, peer, tagData); err != nil {
				return 0, err
			}
			if _, err := c.Recv(r, peer, tagData); err != nil {
				return 0, err
			}
		} else {
			if _, err := c.Recv(r, peer, tagData); err != nil {
				return 0, err
			}
			if err := c.Send(s, peer, tagData); err != nil {
				return 0, err
			}
		}
	}
	return b.lap(b.warmup + b.iters), nil
}

func (b *runner) latency(n int) (Row, error) {
	me := b.c.Rank()
	if me > 1 {
		return Row{}, nil
	}
	el, err := b.pingpong(me, 1-me, n)
	if err != nil {
		return Row{}, err
	}
	return b.row(Field{"lat_us", micros(el) / float64(2*b.iters)}, func(d time.Duration) float64 { return micros(d) / 2 }), nil
}

// stream sends (or receives) a window of messages per iteration and
// exchanges a 4-byte ack after each window; it returns the timed part on
// the sender.
func (b *runner) stream(me, peer, n int, sender bool) (time.Duration, error) {
	c := b.c
	for i := 0; i < b.warmup+b.iters; i++ {
		b.lap(i)
		b.reqs = b.reqs[:0]
		if err := b.post(n, peer, sender); err != nil {
			return 0, err
		}
		if err := c.Waitall(b.reqs, nil); err != nil {
			return 0, err
		}
		if sender {
			if _, err := c.Recv(b.ack, peer, tagAck); err != nil {
				return 0, err
			}
		} else if err := c.Send(b.ack, peer, tagAck); err != nil {
			return 0, err
		}
	}
	return b.lap(b.warmup + b.iters), nil
}

// post starts a window of n-byte sends (or receives) with peer, adding
// the requests to b.reqs.
func (b *runner) post(n, peer int, send bool) error {
	for range b.o.Window {
		var r *pml.Request
		var err error
		if send {
			r, err = b.c.Isend(b.sbuf[:n], peer, tagData)
		} else {
			r, err = b.c.Irecv(b.rbuf[:n], peer, tagData)
		}
		if err != nil {
			return err
		}
		b.reqs = append(b.reqs, r)
	}
	return nil
}

func (b *runner) bandwidth(n int, bidir bool) (Row, error) {
	c := b.c
	me := c.Rank()
	if me > 1 {
		return Row{}, nil
	}
	peer := 1 - me
	window := float64(n) * float64(b.o.Window) / 1e6 // MB per window and direction
	if !bidir {
		el, err := b.stream(me, peer, n, me == 0)
		if err != nil {
			return Row{}, err
		}
		return b.row(Field{"mbps", window * float64(b.iters) / el.Seconds()}, func(d time.Duration) float64 { return window / d.Seconds() }), nil
	}
	for i := 0; i < b.warmup+b.iters; i++ {
		b.lap(i)
		b.reqs = b.reqs[:0]
		if err := b.post(n, peer, false); err != nil {
			return Row{}, err
		}
		if err := b.post(n, peer, true); err != nil {
			return Row{}, err
		}
		if err := c.Waitall(b.reqs, nil); err != nil {
			return Row{}, err
		}
	}
	el := b.lap(b.warmup + b.iters)
	return b.row(Field{"mbps", 2 * window * float64(b.iters) / el.Seconds()}, func(d time.Duration) float64 { return 2 * window / d.Seconds() }), nil
}

// gather collects one value from every rank on rank 0 (nil elsewhere).
func (b *runner) gather(v float64) ([]float64, error) {
	c := b.c
	var buf [8]byte
	if c.Rank() != 0 {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v))
		return nil, c.Send(buf[:], 0, tagResult)
	}
	out := make([]float64, c.Size())
	out[0] = v
	for r := 1; r < c.Size(); r++ {
		st, err := c.Recv(buf[:], r, tagResult)
		if err != nil {
			return nil, err
		}
		if st.Count != 8 {
			return nil, fmt.Errorf("rank %d sent a %d-byte result", r, st.Count)
		}
		out[r] = math.Float64frombits(binary.LittleEndian.Uint64(buf[:]))
	}
	return out, nil
}

func (b *runner) msgrate(n int) (Row, error) {
	c := b.c
	half := c.Size() / 2
	me := c.Rank()
	sender := me < half
	peer := me + half
	if !sender {
		peer = me - half
	}
	el, err := b.stream(me, peer, n, sender)
	if err != nil {
		return Row{}, err
	}
	v := 0.0
	if sender {
		v = el.Seconds()
	}
	times, err := b.gather(v)
	if me != 0 || err != nil {
		return Row{}, err
	}
	worst := 0.0
	pairs := make([]float64, half)
	for i, t := range times[:half] {
		worst = max(worst, t)
		pairs[i] = float64(b.o.Window*b.iters) / t
	}
	rate := float64(half*b.o.Window*b.iters) / worst
	row := b.row(Field{"msgs_per_s", rate}, nil)
	row.Fields = append(row.Fields, Field{"mbps", rate * float64(n) / 1e6})
	return row.with(spread("pair_msgs_per_s", pairs)...), nil
}

func (b *runner) multiPingPong(n int) (Row, error) {
	c := b.c
	half := c.Size() / 2
	me := c.Rank()
	peer := me + half
	if me >= half {
		peer = me - half
	}
	el, err := b.pingpong(me, peer, n)
	if err != nil {
		return Row{}, err
	}
	lats, err := b.gather(micros(el) / float64(2*b.iters))
	if me != 0 || err != nil {
		return Row{}, err
	}
	sum, worst := 0.0, 0.0
	for _, l := range lats[:half] {
		sum += l
		worst = max(worst, l)
	}
	row := b.row(Field{"lat_us", sum / float64(half)}, func(d time.Duration) float64 { return micros(d) / 2 })
	return row.with(Field{"lat_max_us", worst}), nil
}
