package bench

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/gobtl/gobtl/pml"
)

// compute keeps the CPU busy for d without calling the library, as the
// application's computation in seed 004 §5.1.
func compute(d time.Duration) {
	start := time.Now()
	for time.Since(start) < d {
	}
}

// overlap measures seed 004 §5.1's sender and receiver overlap between
// ranks 0 (sender) and 1 (receiver).
func (b *runner) overlap(n int) (Row, error) {
	c := b.c
	me := c.Rank()
	if me > 1 {
		return Row{}, nil
	}
	peer := 1 - me
	s, r := b.sbuf[:n], b.rbuf[:n]

	// W: given, or twice the time a blocking transfer takes, agreed on by
	// rank 0.
	w := b.o.Compute
	if w <= 0 {
		var t0 time.Time
		reps := max(b.iters/4, 4)
		for i := 0; i < reps+2; i++ {
			if i == 2 {
				t0 = time.Now()
			}
			if me == 0 {
				if err := c.Send(s, peer, tagData); err != nil {
					return Row{}, err
				}
				if _, err := c.Recv(b.ack, peer, tagAck); err != nil {
					return Row{}, err
				}
			} else {
				if _, err := c.Recv(r, peer, tagData); err != nil {
					return Row{}, err
				}
				if err := c.Send(b.ack, peer, tagAck); err != nil {
					return Row{}, err
				}
			}
		}
		w = 2 * time.Since(t0) / time.Duration(reps)
	}
	var wb [8]byte
	if me == 0 {
		binary.LittleEndian.PutUint64(wb[:], uint64(w))
		if err := c.Send(wb[:], peer, tagResult); err != nil {
			return Row{}, err
		}
	} else {
		if _, err := c.Recv(wb[:], peer, tagResult); err != nil {
			return Row{}, err
		}
		w = time.Duration(binary.LittleEndian.Uint64(wb[:]))
	}

	// Sender overlap: rank 0 computes between Isend and Wait; rank 1 blocks
	// in Recv. Receiver overlap: rank 1 computes between Irecv and Wait;
	// rank 0 blocks in Send.
	tSend, err := b.overlapRun(0, w, s, r)
	if err != nil {
		return Row{}, err
	}
	tRecv, err := b.overlapRun(1, w, s, r)
	if err != nil {
		return Row{}, err
	}
	// Rank 1 reports its receive time to rank 0.
	if me == 1 {
		binary.LittleEndian.PutUint64(wb[:], math.Float64bits(micros(tRecv)/float64(b.iters)))
		return Row{}, c.Send(wb[:], 0, tagResult)
	}
	if _, err := c.Recv(wb[:], 1, tagResult); err != nil {
		return Row{}, err
	}
	ts := micros(tSend) / float64(b.iters)
	tr := math.Float64frombits(binary.LittleEndian.Uint64(wb[:]))
	wu := micros(w)
	row := b.row(Field{"compute_us", wu}, nil)
	return row.with(Field{"time_send_us", ts}, Field{"overlap_send", wu / ts},
		Field{"time_recv_us", tr}, Field{"overlap_recv", wu / tr}), nil
}

// overlapRun sends s from rank 0 into r on rank 1, warmup+iters times. The
// rank named computer starts its side without blocking, computes for w,
// then waits, and returns the timed iterations' total; the other rank
// blocks. An ack from rank 1 separates the iterations.
func (b *runner) overlapRun(computer int, w time.Duration, s, r []byte) (time.Duration, error) {
	c := b.c
	me := c.Rank()
	peer := 1 - me
	var total time.Duration
	for i := 0; i < b.warmup+b.iters; i++ {
		if me == computer {
			t0 := time.Now()
			var req *pml.Request
			var err error
			if me == 0 {
				req, err = c.Isend(s, peer, tagData)
			} else {
				req, err = c.Irecv(r, peer, tagData)
			}
			if err != nil {
				return 0, err
			}
			compute(w)
			if _, err := c.Wait(req); err != nil {
				return 0, err
			}
			if i >= b.warmup {
				total += time.Since(t0)
			}
		} else {
			var err error
			if me == 0 {
				err = c.Send(s, peer, tagData)
			} else {
				_, err = c.Recv(r, peer, tagData)
			}
			if err != nil {
				return 0, err
			}
		}
		var err error
		if me == 0 {
			_, err = c.Recv(b.ack, peer, tagAck)
		} else {
			err = c.Send(b.ack, peer, tagAck)
		}
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}
