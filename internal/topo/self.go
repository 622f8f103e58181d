package topo

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Environment `gobtl run` sets for each rank.
const (
	// EnvNodeCPUs is the launcher's own affinity: the CPUs the job's ranks
	// on this node share, bound or not.
	EnvNodeCPUs = "GOBTL_NODE_CPUS"
	// EnvBind is what the launcher bound each rank to: "core", "numa",
	// "socket", or "none".
	EnvBind = "GOBTL_BIND"
)

// Affinity is this process's affinity mask (its main thread's: what it
// started with and its threads inherit).
func Affinity() (CPUs, error) {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &s); err != nil {
		return nil, fmt.Errorf("topo: sched_getaffinity: %w", err)
	}
	return fromSet(&s), nil
}

// Binding is where this rank runs: its own affinity and the CPUs the
// job's ranks on its node share. It is read, never set: whoever started
// the rank — `gobtl run`, mpirun, srun — bound it or did not.
type Binding struct {
	// Mask is the rank's affinity when it was read (at start).
	Mask CPUs
	// Node is what the job's ranks on this node may use: the launcher's
	// affinity (EnvNodeCPUs) under `gobtl run`; else the cgroup's cpuset
	// (Slurm's task/cgroup, a container) or the online CPUs.
	Node CPUs
	// Topo is Node's topology; nil when /sys could not be read (Err).
	Topo *Topology
	Err  error
}

// Bound reports whether the rank may run on fewer CPUs than its node's
// ranks share: someone bound it.
func (b Binding) Bound() bool { return len(b.Mask) < len(b.Node) }

// Cores is the number of cores the node's ranks share (CPUs when the
// topology is unknown).
func (b Binding) Cores() int {
	if b.Topo == nil {
		return len(b.Node)
	}
	return b.Topo.CoresIn(b.Node)
}

// OwnsCore reports whether each of ranks ranks on this node has a core
// to itself: the node's ranks fit its cores, whether an engine bound them
// one to a core or the kernel spreads them. Ranks that own a core may
// spin while they wait; the others share and must yield.
func (b Binding) OwnsCore(ranks int) bool { return ranks <= b.Cores() }

// String says where the rank runs: "bound to core 1 of socket 0 (cpus
// 1,9)", or "not bound (cpus 0-15)".
func (b Binding) String() string {
	if len(b.Mask) == 0 {
		return fmt.Sprintf("binding unknown (%v)", b.Err)
	}
	if !b.Bound() {
		return "not bound (cpus " + b.Mask.String() + ")"
	}
	return "bound to " + b.Topo.Describe(b.Mask)
}

// Self is this process's Binding, read once: the first call fixes it,
// so call it before anything changes the process's affinity (a pinned
// NIC thread takes its CPU from the other threads).
var Self = sync.OnceValue(func() Binding {
	mask, err := Affinity()
	if err != nil {
		return Binding{Err: err}
	}
	return self(Sys, "/proc/self/cgroup", os.Getenv, mask)
})

// self is Self of a process with affinity mask, reading the topology from
// sys, its cgroup from cgroupFile and the launcher's word from env.
func self(sys, cgroupFile string, env func(string) string, mask CPUs) Binding {
	b := Binding{Mask: mask}
	t, err := Read(sys)
	if err != nil {
		b.Node, b.Err = mask, err
		return b
	}
	b.Node = t.CPUs
	if v := env(EnvNodeCPUs); v != "" {
		if c, err := ParseCPUs(v); err == nil && len(c) > 0 {
			b.Node = c
		}
	} else if c, ok := cgroupCPUs(sys, cgroupFile); ok {
		b.Node = c
	}
	// The rank's own CPUs are the node's whatever the sources say.
	b.Node = b.Node.And(t.CPUs).Or(mask)
	b.Topo = t.Within(b.Node)
	return b
}

// cgroupCPUs reads the effective cpuset of this process's cgroup (v2's
// cpuset.cpus.effective, v1's cpuset.effective_cpus).
func cgroupCPUs(sys, cgroupFile string) (CPUs, bool) {
	f, err := os.Open(cgroupFile)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || strings.Contains(parts[2], "..") {
			continue
		}
		var path string
		switch {
		case parts[0] == "0" && parts[1] == "":
			path = filepath.Join(sys, "fs/cgroup", parts[2], "cpuset.cpus.effective")
		case hasWord(parts[1], "cpuset"):
			path = filepath.Join(sys, "fs/cgroup/cpuset", parts[2], "cpuset.effective_cpus")
		default:
			continue
		}
		if c, err := readCPUs(path); err == nil && len(c) > 0 {
			return c, true
		}
	}
	return nil, false
}

func hasWord(list, w string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == w {
			return true
		}
	}
	return false
}
