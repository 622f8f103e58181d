package extoll

import (
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/pml"
)

// Ping-pong between two ranks (goroutines, each with its own mailbox),
// one-way latency per message, under each flow control.
func BenchmarkPingPong(b *testing.B) {
	for _, s := range schemes {
		for _, size := range []int{8, 2048, 65536} {
			b.Run(fmt.Sprintf("%s/%dB", s.name, size), func(b *testing.B) {
				comms, _ := ranks(&testing.T{}, 2, max(s.perPeer, 64), s.policy, nil)
				msg, buf := make([]byte, size), make([]byte, size)
				done := make(chan error, 1)
				go func() {
					c := comms[1]
					for range b.N {
						if _, err := c.Recv(buf, 0, 1); err != nil {
							done <- err
							return
						}
						if err := c.Send(msg, 0, 1); err != nil {
							done <- err
							return
						}
					}
					done <- c.Barrier()
				}()
				b.ResetTimer()
				c := comms[0]
				for range b.N {
					if err := c.Send(msg, 1, 1); err != nil {
						b.Fatal(err)
					}
					if _, err := c.Recv(buf, 1, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := c.Barrier(); err != nil {
					b.Fatal(err)
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N)/1e3, "us/oneway")
				closeAll(comms)
				_ = pml.AnySource
			})
		}
	}
}
