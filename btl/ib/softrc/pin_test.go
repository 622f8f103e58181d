package softrc

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A device with PinNIC runs its NIC work on a thread of its own pinned to
// one CPU, keeps the process's other threads off it while open, and gives
// it back when closed. With one CPU to run on, it is not pinned and says
// why.
func TestTheNICThreadIsPinnedToACPUOfItsOwn(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	p := NewProvider()
	if err := p.Configure("pin0", DeviceConfig{PinNIC: true, NICCPU: -1}); err != nil {
		t.Fatal(err)
	}
	d, err := p.OpenDevice("pin0")
	if err != nil {
		t.Fatal(err)
	}
	var tid, cpu int
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ok bool
		tid, cpu, err, ok = d.NICThread()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the NIC goroutine did not report its thread within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	if allowed.Count() < 2 {
		if !errors.Is(err, errNoFreeCore) {
			t.Fatalf("one CPU allowed: %v, want %v", err, errNoFreeCore)
		}
		d.Close()
		return
	}
	if err != nil || cpu < 0 || !allowed.IsSet(cpu) {
		t.Fatalf("pinned to %d: %v", cpu, err)
	}
	if got := cpusOf(t, tid); got != fmt.Sprint(cpu) {
		t.Fatalf("the NIC thread %d may run on %q, want only CPU %d", tid, got, cpu)
	}
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(unix.Gettid(), &mine); err != nil {
		t.Fatal(err)
	}
	if mine.IsSet(cpu) {
		t.Fatalf("this thread may still run on the NIC's CPU %d", cpu)
	}
	d.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if err := unix.SchedGetaffinity(unix.Gettid(), &mine); err != nil {
			t.Fatal(err)
		}
		if mine.IsSet(cpu) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU %d not given back after Close", cpu)
		}
	}
}

// cpusOf is a thread's Cpus_allowed_list.
func cpusOf(t *testing.T, tid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for thread %d", tid)
	return ""
}
