package msgtest

import "golang.org/x/sys/unix"

// ThreadNS is the CPU time of the calling thread, in nanoseconds: unlike
// the wall clock it does not count the time other processes hold the
// core, so a benchmark that reports it is inflated less by a loaded
// machine. The caller keeps its goroutine on one thread
// (runtime.LockOSThread) between two readings.
func ThreadNS() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}
