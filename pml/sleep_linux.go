package pml

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// osYield gives the processor to another runnable thread of any process.
//
// It is a raw system call, as the runtime's own osyield: the Go scheduler
// does not see it. Through syscall.Syscall, a yield that the kernel keeps
// for more than 20 µs — every yield on a node with more ranks than CPUs,
// where it lets another rank run — leaves the rank's P in a system call
// for sysmon to take back: sysmon hands it to a fresh thread to poll the
// network, the rank's thread finds its P gone when the yield returns and
// waits for one, and sysmon, having taken a P, polls again 20 µs later
// instead of backing off to 10 ms. A 4-rank ping-pong on 2 CPUs measured
// one futex and 0.6 nanosleep (sysmon's) per round trip, each a thread
// switch on a CPU the ranks share. sched_yield does not block, so the P
// has nothing to give away while it runs.
func osYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// osSleep sleeps for about d. Linux pads sleeps by the thread's timer
// slack (50 µs by default); a waiter wants to wake on time, so it asks for
// a slack of 1 ns on the thread it sleeps on. Measured here: a 10 µs
// nanosleep takes ~25 µs with it, ~80 µs without, and time.Sleep ~1 ms.
func osSleep(d time.Duration) {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)
}

// osSleepRaw is osSleep as a raw system call, for a rank that owns its
// core (Backoff.OwnCore): the Go scheduler does not see it, so the rank
// keeps its P while it sleeps. Through syscall.Syscall a sleep of more
// than 20 µs let sysmon take the P back and hand it to a fresh thread
// (futex wake-ups, a thread spinning for work on the rank's core), the
// rank's thread waited for a P when the sleep ended, and sysmon, having
// taken one, polled again 20 µs later instead of backing off to 10 ms:
// on a rank bound to one CPU every one of those is a thread switch on
// that CPU. The caller lets the runtime's goroutines run first.
func osSleepRaw(d time.Duration) {
	_, _, _ = unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_TIMERSLACK, 1, 0, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
