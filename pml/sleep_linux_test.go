package pml

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

// TestYieldIsInvisibleToTheScheduler pins that osYield is a raw system
// call: the goroutine that yields stays running as far as the Go scheduler
// knows, so that sysmon never takes its P back while the kernel runs
// another rank (see osYield). A yield made through syscall.Syscall shows up
// in /sched/goroutines/not-in-go for as long as the kernel keeps it; a
// goroutine that does nothing but yield is then seen there in most
// samples.
func TestYieldIsInvisibleToTheScheduler(t *testing.T) {
	invisibleToTheScheduler(t, "yield", osYield)
}

// TestAnOwnedCoresSleepIsInvisibleToTheScheduler pins the same of
// osSleepRaw, the sleep of a rank that owns its core: sysmon must not take
// its P while it sleeps (through syscall.Syscall — osSleep — the sleeping
// goroutine is seen out of Go in nearly every sample).
func TestAnOwnedCoresSleepIsInvisibleToTheScheduler(t *testing.T) {
	invisibleToTheScheduler(t, "sleep", func() { osSleepRaw(20 * time.Microsecond) })
}

// invisibleToTheScheduler fails t if a goroutine that calls call in a loop
// is seen out of Go (in a system call the scheduler tracks) in more than a
// quarter of the samples.
func invisibleToTheScheduler(t *testing.T, what string, call func()) {
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
	var calls atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			call()
			calls.Add(1)
		}
	}()
	for calls.Load() == 0 {
		runtime.Gosched()
	}
	// Sample while the goroutine makes 2,000 more calls, at least 1,000
	// times and at most 2^20 (a yield the scheduler sees may lose its P
	// and wait for one).
	const want = 2000
	until := calls.Load() + want
	samples, seen := 0, 0
	for samples < 1000 || calls.Load() < until && samples < 1<<20 {
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
		t.Errorf("%d of %d samples saw a goroutine out of Go while one called %s %d times: the %[3]s is a system call the scheduler tracks", seen, samples, what, calls.Load())
	}
}
