package gobtl

import (
	"context"
	"testing"

	"github.com/gobtl/gobtl/pml"
)

// The Comm's point-to-point methods are the PML's, inlined or one call:
// a window of 8-byte messages through *Comm and through the *pml.Comm
// under it, both ranks driven from one goroutine, costs the same.

// twoComms runs fn with both ranks of a RunLocal job in the calling
// goroutine; the ranks' own goroutines wait until fn is done.
func twoComms(b *testing.B, fn func(c [2]*Comm)) {
	b.Helper()
	ready := make(chan *Comm, 2)
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- RunLocal(context.Background(), 2, Options{}, func(c *Comm) error {
			ready <- c
			<-done
			return c.Barrier()
		})
	}()
	var cs [2]*Comm
	for range 2 {
		c := <-ready
		cs[c.Rank()] = c
	}
	fn(cs)
	close(done)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRate8BThroughComm: a window of 64 Isends and Irecvs, then
// Waitall on both sides, per message, through *Comm (comm) and through
// its *pml.Comm (pml).
func BenchmarkRate8BThroughComm(b *testing.B) {
	twoComms(b, func(cs [2]*Comm) {
		for _, name := range []string{"comm", "pml"} {
			b.Run(name, func(b *testing.B) {
				const window = 64
				sbuf, rbuf := make([]byte, 8), make([]byte, 8)
				rs, ss := make([]*Request, window), make([]*Request, window)
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					if name == "comm" {
						rateWindow(cs[0], cs[1], sbuf, rbuf, ss, rs)
					} else {
						rateWindowPML(cs[0].p, cs[1].p, sbuf, rbuf, ss, rs)
					}
					n += window
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/msg")
			})
		}
	})
}

// rateWindow and rateWindowPML are the same code over the two types, so
// that each call is as the compiler sees it in a program (no interface).
func rateWindow(s, r *Comm, sbuf, rbuf []byte, ss, rs []*Request) {
	for i := range rs {
		rs[i], _ = r.Irecv(rbuf, 0, 1)
	}
	for i := range ss {
		ss[i], _ = s.Isend(sbuf, 1, 1)
	}
	s.Waitall(ss, nil)
	r.Waitall(rs, nil)
}

func rateWindowPML(s, r *pml.Comm, sbuf, rbuf []byte, ss, rs []*Request) {
	for i := range rs {
		rs[i], _ = r.Irecv(rbuf, 0, 1)
	}
	for i := range ss {
		ss[i], _ = s.Isend(sbuf, 1, 1)
	}
	s.Waitall(ss, nil)
	r.Waitall(rs, nil)
}
