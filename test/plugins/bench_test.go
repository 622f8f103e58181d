package plugins_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
)

// benchPolicy is the scheduling policy of BenchmarkJob: weights that
// follow the rails' measured bandwidth, so that the policy decides all
// through the run. Its plugin is plugins/adaptive_striping, which serves
// the very code that is built in.
const benchPolicy = "adaptive_striping"

// benchStack is two in-process rails and benchPolicy, built in or as a
// plugin.
func benchStack(b *testing.B, how string) string {
	if how == "plugin" {
		return stackWith(b, fmt.Sprintf("plugin = %q\n  plugin_dir = %q", benchPolicy, builtinDir), "")
	}
	return stackWith(b, fmt.Sprintf("builtin = %q", benchPolicy), "")
}

// BenchmarkJob is the same two-rank job with the scheduling policy built
// in and as a plugin process: the message rate of 8-byte messages and the
// bandwidth of 1 MiB messages, windows of non-blocking sends (osu_mbw_mr
// style), rank 0 to rank 1 over two in-process rails.
func BenchmarkJob(b *testing.B) {
	for _, size := range []int{8, 1 << 20} {
		for _, how := range []string{"builtin", "plugin"} {
			b.Run(fmt.Sprintf("%s/%dB", how, size), func(b *testing.B) {
				window := 64
				if size > 4096 {
					window = 16
				}
				path := benchStack(b, how)
				var elapsed time.Duration
				err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{path}}, func(c *gobtl.Comm) error {
					bufs := make([][]byte, window)
					for i := range bufs {
						bufs[i] = make([]byte, size)
					}
					reqs := make([]*gobtl.Request, window)
					ack := make([]byte, 1)
					round := func() error {
						for i := range reqs {
							var err error
							if c.Rank() == 0 {
								reqs[i], err = c.Isend(bufs[i], 1, i)
							} else {
								reqs[i], err = c.Irecv(bufs[i], 0, i)
							}
							if err != nil {
								return err
							}
						}
						if err := c.Waitall(reqs, nil); err != nil {
							return err
						}
						if c.Rank() == 0 {
							_, err := c.Recv(ack, 1, 999)
							return err
						}
						return c.Send(ack, 0, 999)
					}
					for i := 0; i < 10; i++ { // warm up: connections, buffers, the plugin's stream
						if err := round(); err != nil {
							return err
						}
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					start := time.Now()
					if c.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						if err := round(); err != nil {
							return err
						}
					}
					if c.Rank() == 0 {
						b.StopTimer()
						elapsed = time.Since(start)
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				msgs := float64(b.N * window)
				b.ReportMetric(msgs/elapsed.Seconds()/1e6, "Mmsg/s")
				b.ReportMetric(msgs*float64(size)/elapsed.Seconds()/1e6, "MB/s")
			})
		}
	}
}
