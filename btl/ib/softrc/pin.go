package softrc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// The NIC thread. softrc's device goroutine does the work a real HCA's
// processors do (doc.go): with the ranks computing on every core, it gets
// a core only when a rank yields, and the data stops moving while the
// ranks compute — no overlap (seed 004 §5.1 measures it with the HCA
// working beside the CPU). With DeviceConfig.PinNIC the goroutine runs on
// an OS thread of its own (runtime.LockOSThread), pinned to one CPU
// (sched_setaffinity), and the process's other threads are kept off that
// CPU, so the NIC work and the application never share a core. It needs
// a CPU to spare: a process allowed a single CPU is not pinned.

// errNoFreeCore is why a NIC thread could not be pinned.
var errNoFreeCore = errors.New("no CPU to spare: the process may run on one CPU only")

// nicPin is what pinning did: the thread and its CPU. When the device
// closes, the process's threads get that CPU back.
type nicPin struct {
	tid, cpu int
	err      error
}

// pinned are the process's pinned NIC threads, which keep their one CPU
// when another device's NIC thread gives its CPU back.
var pinned = struct {
	sync.Mutex
	tids map[int]bool
}{tids: map[int]bool{}}

// pin locks the calling goroutine (the device's NIC goroutine) to its
// thread and that thread to a CPU: want, or the last CPU the process may
// use when want < 0.
func pin(want int) (p nicPin) {
	runtime.LockOSThread()
	p.tid, p.cpu = unix.Gettid(), -1
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		p.err = fmt.Errorf("sched_getaffinity: %w", err)
		return p
	}
	if allowed.Count() < 2 {
		p.err = errNoFreeCore
		return p
	}
	cpu := nicCPU(&allowed, want)
	if cpu < 0 || !allowed.IsSet(cpu) {
		p.err = fmt.Errorf("CPU %d is not one this process may use", cpu)
		return p
	}
	var mine unix.CPUSet
	mine.Set(cpu)
	if err := unix.SchedSetaffinity(0, &mine); err != nil {
		p.err = fmt.Errorf("sched_setaffinity: %w", err)
		return p
	}
	p.cpu = cpu
	pinned.Lock()
	defer pinned.Unlock()
	pinned.tids[p.tid] = true
	// The rest of the process keeps off the NIC's CPU. Threads the Go
	// runtime starts later inherit their creator's mask, which is one of
	// these (a locked thread's new threads come from the runtime's
	// template thread, also one of these).
	eachThread(func(tid int, set *unix.CPUSet) bool {
		if !set.IsSet(cpu) || set.Count() < 2 {
			return false
		}
		set.Clear(cpu)
		return true
	})
	return p
}

// nicCPU is the CPU a NIC thread pins to: want, or with want < 0 the
// (-want)th CPU of allowed counted from the last — the ranks of a node
// give their NICs -1 - their index on it (DeviceConfig.NICCPU), so that
// with ranks unbound each NIC has a CPU of its own — or -1 when allowed
// has fewer.
func nicCPU(allowed *unix.CPUSet, want int) int {
	if want >= 0 {
		return want
	}
	for c := 8*unsafeSizeofCPUSet - 1; c >= 0; c-- {
		if allowed.IsSet(c) {
			if want++; want == 0 {
				return c
			}
		}
	}
	return -1
}

// unpin gives the NIC's CPU back to the process's threads, other NIC
// threads apart.
func (p nicPin) unpin() {
	if p.cpu < 0 {
		return
	}
	pinned.Lock()
	defer pinned.Unlock()
	delete(pinned.tids, p.tid)
	eachThread(func(tid int, set *unix.CPUSet) bool {
		if set.IsSet(p.cpu) {
			return false
		}
		set.Set(p.cpu)
		return true
	})
}

// eachThread offers the affinity of every thread of the process but the
// pinned NIC threads to change, and applies it where change says so.
func eachThread(change func(tid int, set *unix.CPUSet) bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil || pinned.tids[tid] {
			continue
		}
		var set unix.CPUSet
		if unix.SchedGetaffinity(tid, &set) == nil && change(tid, &set) {
			unix.SchedSetaffinity(tid, &set)
		}
	}
}

// unsafeSizeofCPUSet is the bytes of a unix.CPUSet.
const unsafeSizeofCPUSet = len(unix.CPUSet{}) * 8

// NICThread reports how the device's NIC work runs: pinned to cpu on
// thread tid, or why not (err); ok is false until the device goroutine
// has tried, or when PinNIC is off.
func (d *Device) NICThread() (tid, cpu int, err error, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pin == nil {
		return 0, -1, nil, false
	}
	return d.pin.tid, d.pin.cpu, d.pin.err, true
}
