package engines

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkInit is the launch cost of a job under each engine: the ranks
// of testdata/rank start, Init and end. It reports, as the mean over b.N
// jobs, launch-ms (from starting the engine to the last rank returning
// from Init), init-ms (the slowest rank's gobtl.Init call) and the whole
// job as ns/op. Run it with
//
//	go test -run XXX -bench Init -benchtime 3x ./test/engines
func BenchmarkInit(b *testing.B) {
	for _, e := range allEngines {
		for _, np := range []int{2, 4, 8, 16} {
			b.Run(fmt.Sprintf("%s/np=%d", e.name, np), func(b *testing.B) {
				e.need(b)
				var launch, doInit time.Duration
				for b.Loop() {
					r := run(b, e, np, nil, bin("rank"))
					if r.status != 0 {
						b.Fatalf("%s failed:\n%s", e.name, r)
					}
					var l, i time.Duration
					for _, in := range inits(b, r, np) {
						l, i = max(l, in.launch), max(i, in.doInit)
					}
					launch += l
					doInit += i
				}
				b.ReportMetric(float64(launch.Milliseconds())/float64(b.N), "launch-ms")
				b.ReportMetric(float64(doInit.Microseconds())/1e3/float64(b.N), "init-ms")
			})
		}
	}
}

// BenchmarkTwoHostLatency is `gobtl bench latency` between two ranks on
// different hosts (softrc over the link) next to two ranks on one host
// (shared memory), both started by mpirun across the two-host setup. It
// reports the one-way latency of 8 B, 4 KiB and 1 MiB messages in µs.
func BenchmarkTwoHostLatency(b *testing.B) {
	h := newTwoHosts(b)
	for _, c := range []struct {
		name   string
		na, nb int
	}{{"one-host", 2, 0}, {"two-hosts", 1, 1}} {
		b.Run(c.name, func(b *testing.B) {
			lat := map[int]float64{}
			for b.Loop() {
				r := h.run(b, c.na, c.nb, nil, bin("gobtl"), "bench", "latency", "--sizes", "8,4KiB,1MiB", "--json")
				if r.status != 0 {
					b.Fatalf("latency failed:\n%s", r)
				}
				var rep struct{ Rows []map[string]float64 }
				if err := json.NewDecoder(strings.NewReader(r.stdout)).Decode(&rep); err != nil {
					b.Fatalf("latency's report: %v\n%s", err, r)
				}
				for _, row := range rep.Rows {
					lat[int(row["size"])] += row["lat_us"]
				}
			}
			for _, size := range []int{8, 4 << 10, 1 << 20} {
				b.ReportMetric(lat[size]/float64(b.N), fmt.Sprintf("us-%dB", size))
			}
		})
	}
}
