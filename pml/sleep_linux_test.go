package pml

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync/atomic"
	"testing"
)

// TestYieldIsInvisibleToTheScheduler pins that osYield is a raw system
// call: the goroutine that yields stays running as far as the Go scheduler
// knows, so that sysmon never takes its P back while the kernel runs
// another rank (see osYield). A yield made through syscall.Syscall shows up
// in /sched/goroutines/not-in-go for as long as the kernel keeps it; a
// goroutine that does nothing but yield is then seen there in most
// samples.
func TestYieldIsInvisibleToTheScheduler(t *testing.T) {
	s := []rtmetrics.Sample{{Name: "/sched/goroutines/not-in-go:goroutines"}}
	read := func() uint64 {
		rtmetrics.Read(s)
		if s[0].Value.Kind() != rtmetrics.KindUint64 {
			t.Skipf("runtime has no %s", s[0].Name)
		}
		return s[0].Value.Uint64()
	}
	base := read()
	var stop atomic.Bool
	var yields atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			osYield()
			yields.Add(1)
		}
	}()
	for yields.Load() == 0 {
		runtime.Gosched()
	}
	// Sample while the goroutine makes 2,000 more yields, at least 1,000
	// times and at most 2^20 (a yield the scheduler sees may lose its P
	// and wait for one).
	const want = 2000
	until := yields.Load() + want
	samples, seen := 0, 0
	for samples < 1000 || yields.Load() < until && samples < 1<<20 {
		if read() > base {
			seen++
		}
		samples++
	}
	stop.Store(true)
	<-done
	if after := read(); after > base {
		t.Skipf("another goroutine of the test binary is in a system call (%d, before %d): no baseline", after, base)
	}
	// Other goroutines of the binary may enter system calls now and then;
	// a yield the scheduler sees is in nearly every sample.
	if seen > samples/4 {
		t.Errorf("%d of %d samples saw a goroutine out of Go while one yielded %d times: the yield is a system call the scheduler tracks", seen, samples, yields.Load())
	}
}
