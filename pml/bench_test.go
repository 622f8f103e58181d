package pml

import (
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/btl/inproc"
)

// BenchmarkEagerSendRecv drives both ranks from one goroutine: it measures
// the software cost of one eager message (send, frame, match, receive)
// over the in-process fabric, without any cross-core wake-up.
func BenchmarkEagerSendRecv(b *testing.B) {
	for _, size := range []int{8, 1024, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			w := newWorld(b, 2, oneRail, Options{})
			a, c := w.comms[0], w.comms[1]
			sbuf, rbuf := make([]byte, size), make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, _ := c.Irecv(rbuf, 0, 1)
				s, _ := a.Isend(sbuf, 1, 1)
				a.Wait(s)
				c.Wait(r)
			}
		})
	}
}

// BenchmarkPingPong is a ping-pong between two goroutine ranks: one-way
// latency per message including the hand-over between cores.
func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{8, 64 << 10, 1 << 20} {
		for _, proto := range []Protocol{ProtoRead, ProtoWrite, ProtoPipeline} {
			if size <= 4096 && proto != ProtoRead {
				continue
			}
			b.Run(fmt.Sprintf("%dB/%v", size, proto), func(b *testing.B) {
				w := newWorld(b, 2, oneRail, Options{Protocol: proto, Backoff: Backoff{Spin: 1 << 30}})
				buf0, buf1 := make([]byte, size), make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				done := make(chan struct{})
				go func() {
					c := w.comms[1]
					for i := 0; i < b.N; i++ {
						c.Recv(buf1, 0, 0)
						c.Send(buf1, 0, 0)
					}
					close(done)
				}()
				c := w.comms[0]
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					c.Send(buf0, 1, 0)
					c.Recv(buf0, 1, 0)
				}
				<-done
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/one-way")
			})
		}
	}
}

// BenchmarkPipelineSendRecv drives both ranks from one goroutine through
// the copy-in/copy-out pipeline over a rail shaped like sm's defaults (32
// KiB fragments, 64 slots): the software cost of the pipeline per message,
// frames and steps included.
func BenchmarkPipelineSendRecv(b *testing.B) {
	rail := []inproc.RailOptions{{MaxSendSize: 32 << 10, NoRDMA: true}}
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			w := newWorld(b, 2, rail, Options{Protocol: ProtoPipeline})
			a, c := w.comms[0], w.comms[1]
			sbuf, rbuf := make([]byte, size), make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, _ := c.Irecv(rbuf, 0, 1)
				s, _ := a.Isend(sbuf, 1, 1)
				for s != nil || r != nil {
					if s != nil {
						if ok, _, _ := a.Test(s); ok {
							s = nil
						}
					}
					if r != nil {
						if ok, _, _ := c.Test(r); ok {
							r = nil
						}
					}
				}
			}
		})
	}
}

// BenchmarkRendezvousSendRecv drives both ranks from one goroutine
// through the RDMA rendezvous (RTS, CTS or the read, FIN) of a 1 MiB
// message: over one rail, and striped by weight over three (the
// scheduler's plan and the completion filter on every message). It is the
// software cost of the protocol besides the copy.
func BenchmarkRendezvousSendRecv(b *testing.B) {
	const size = 1 << 20
	for _, rails := range []int{1, 3} {
		for _, proto := range []Protocol{ProtoRead, ProtoWrite} {
			b.Run(fmt.Sprintf("%dKiB/%drails/%v", size>>10, rails, proto), func(b *testing.B) {
				var per []func(int, *Options)
				if rails > 1 {
					per = append(per, func(_ int, o *Options) {
						o.Scheduler = schedPolicy(b, "weighted_striping", map[string]string{"weights": "3,2,1", "min_stripe": "64KiB"})
					})
				}
				w := newWorld(b, 2, make([]inproc.RailOptions, rails), Options{Protocol: proto}, per...)
				a, c := w.comms[0], w.comms[1]
				sbuf, rbuf := make([]byte, size), make([]byte, size)
				b.SetBytes(size)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					rendezvousOnce(a, c, sbuf, rbuf)
				}
			})
		}
	}
}

// rendezvousOnce sends sbuf from a to c's rbuf, polling both.
//
//go:noinline
func rendezvousOnce(a, c *Comm, sbuf, rbuf []byte) {
	r, _ := c.Irecv(rbuf, 0, 1)
	s, _ := a.Isend(sbuf, 1, 1)
	for s != nil || r != nil {
		if s != nil {
			if ok, _, _ := a.Test(s); ok {
				s = nil
			}
		}
		if r != nil {
			if ok, _, _ := c.Test(r); ok {
				r = nil
			}
		}
	}
}
