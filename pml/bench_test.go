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
