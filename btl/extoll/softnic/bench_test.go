package softnic

import (
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// An RMA get polled to completion: the software engine's cost without
// the PML's waiting policy.
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{64, 65536, 1 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			devs := job(&testing.T{}, 2, 8, nil)
			reg, _ := devs[1].Register(make([]byte, size), core.AccessRemoteRead)
			local := make([]byte, size)
			b.SetBytes(int64(size))
			for range b.N {
				if err := devs[0].Get(1, nic.Op{Local: local, Remote: reg.Key()}); err != nil {
					b.Fatal(err)
				}
				for {
					if _, ok := devs[0].PollNotification(); ok {
						break
					}
				}
			}
			b.StopTimer()
			for _, d := range devs {
				d.Close()
			}
		})
	}
}

// Packet ping-pong between two devices polled by one goroutine.
func BenchmarkVELOPingPong(b *testing.B) {
	for _, tr := range []Transport{SHM, TCP} {
		b.Run(map[Transport]string{SHM: "shm", TCP: "tcp"}[tr], func(b *testing.B) {
			devs := job(&testing.T{}, 2, 8, func(c *Config) { c.Transport = tr })
			p := []nic.Slot{pkt(1, 8)}
			for range b.N {
				devs[0].Send(1, p)
				for devs[1].Poll() == nil {
				}
				devs[1].Release()
				devs[1].Send(0, p)
				for devs[0].Poll() == nil {
				}
				devs[0].Release()
			}
			b.StopTimer()
			for _, d := range devs {
				d.Close()
			}
		})
	}
}
