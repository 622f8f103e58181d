package topo

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Topology is the CPUs of a node as Linux describes them under /sys:
// hardware threads grouped into cores, cores into sockets (physical
// packages) and NUMA nodes.
type Topology struct {
	// CPUs are the online logical CPUs.
	CPUs CPUs
	// Cores are in the order ranks are mapped onto them: by socket, then
	// NUMA node, then first CPU (the order of hwloc's tree).
	Cores []Core
	// Sockets and NUMA are the packages and memory nodes, by id.
	Sockets, NUMA []Domain
}

// Core is one core and the hardware threads it runs.
type Core struct {
	// Socket and NUMA are the ids of its package and memory node.
	Socket, NUMA int
	// ID is core_id, unique within the socket only.
	ID int
	// CPUs are its hardware threads (thread_siblings_list).
	CPUs CPUs
}

// Domain is a socket or a NUMA node: an id and its CPUs.
type Domain struct {
	ID   int
	CPUs CPUs
}

// Sys is where the kernel's topology is read from.
const Sys = "/sys"

// Read reads the topology of this node from sys (Sys, or a tree of the
// same shape in tests): devices/system/cpu/online,
// cpu/cpuN/topology/{core_id,physical_package_id,thread_siblings_list}
// and devices/system/node/nodeN/cpulist. A kernel without the topology
// files (some VMs, old kernels) gives each CPU a core of its own on
// socket 0; one without NUMA nodes, one node 0 holding every CPU.
func Read(sys string) (*Topology, error) {
	cpuDir := filepath.Join(sys, "devices/system/cpu")
	online, err := readCPUs(filepath.Join(cpuDir, "online"))
	if err != nil {
		return nil, err
	}
	if len(online) == 0 {
		return nil, fmt.Errorf("topo: %s lists no online CPU", filepath.Join(cpuDir, "online"))
	}
	numa, err := readNUMA(filepath.Join(sys, "devices/system/node"), online)
	if err != nil {
		return nil, err
	}
	t := &Topology{CPUs: online, NUMA: numa}
	seen := map[int]bool{} // first CPU of each core already made
	sockets := map[int]CPUs{}
	for _, cpu := range online {
		c, err := readCore(filepath.Join(cpuDir, "cpu"+strconv.Itoa(cpu), "topology"), cpu, online)
		if err != nil {
			return nil, err
		}
		sockets[c.Socket] = append(sockets[c.Socket], cpu)
		if seen[c.CPUs[0]] {
			continue
		}
		seen[c.CPUs[0]] = true
		c.NUMA = numaOf(numa, c.CPUs[0])
		t.Cores = append(t.Cores, c)
	}
	for id, cpus := range sockets {
		t.Sockets = append(t.Sockets, Domain{ID: id, CPUs: cpus})
	}
	slices.SortFunc(t.Sockets, func(a, b Domain) int { return cmp.Compare(a.ID, b.ID) })
	t.sortCores()
	return t, nil
}

func (t *Topology) sortCores() {
	slices.SortFunc(t.Cores, func(a, b Core) int {
		return cmp.Or(cmp.Compare(a.Socket, b.Socket), cmp.Compare(a.NUMA, b.NUMA), cmp.Compare(a.CPUs[0], b.CPUs[0]))
	})
}

// readCore reads cpu's core from its topology directory.
func readCore(dir string, cpu int, online CPUs) (Core, error) {
	c := Core{ID: cpu, CPUs: CPUs{cpu}}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	var err error
	if c.Socket, err = readInt(filepath.Join(dir, "physical_package_id")); err != nil {
		return c, err
	}
	if c.ID, err = readInt(filepath.Join(dir, "core_id")); err != nil {
		return c, err
	}
	sib, err := readCPUs(filepath.Join(dir, "thread_siblings_list"))
	if err != nil {
		return c, err
	}
	// Offline siblings are not ours to run on.
	if sib = sib.And(online); !sib.Has(cpu) {
		return c, fmt.Errorf("topo: %s: cpu %d is not among its own siblings %v", dir, cpu, sib)
	}
	c.CPUs = sib
	return c, nil
}

// readNUMA reads the NUMA nodes, or makes one of every online CPU.
func readNUMA(dir string, online CPUs) ([]Domain, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Domain{{ID: 0, CPUs: online}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	var out []Domain
	for _, e := range ents {
		id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node"))
		if !strings.HasPrefix(e.Name(), "node") || err != nil {
			continue
		}
		cpus, err := readCPUs(filepath.Join(dir, e.Name(), "cpulist"))
		if err != nil {
			return nil, err
		}
		if cpus = cpus.And(online); len(cpus) > 0 { // memory-only nodes run no rank
			out = append(out, Domain{ID: id, CPUs: cpus})
		}
	}
	if len(out) == 0 {
		return []Domain{{ID: 0, CPUs: online}}, nil
	}
	slices.SortFunc(out, func(a, b Domain) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func numaOf(numa []Domain, cpu int) int {
	for _, d := range numa {
		if d.CPUs.Has(cpu) {
			return d.ID
		}
	}
	return 0
}

func readCPUs(path string) (CPUs, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	c, err := ParseCPUs(string(b))
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return c, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("topo: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("topo: %s: %q is not a number", path, strings.TrimSpace(string(b)))
	}
	return v, nil
}

// Within is the part of t on the CPUs in allowed — a launcher's affinity
// mask, a cgroup's cpuset: the cores, sockets and NUMA nodes that keep at
// least one CPU, each with only those CPUs.
func (t *Topology) Within(allowed CPUs) *Topology {
	out := &Topology{CPUs: t.CPUs.And(allowed)}
	for _, c := range t.Cores {
		if c.CPUs = c.CPUs.And(allowed); len(c.CPUs) > 0 {
			out.Cores = append(out.Cores, c)
		}
	}
	keep := func(ds []Domain) []Domain {
		var r []Domain
		for _, d := range ds {
			if d.CPUs = d.CPUs.And(allowed); len(d.CPUs) > 0 {
				r = append(r, d)
			}
		}
		return r
	}
	out.Sockets, out.NUMA = keep(t.Sockets), keep(t.NUMA)
	return out
}

// CoresIn is how many cores have a CPU in set.
func (t *Topology) CoresIn(set CPUs) int {
	n := 0
	for _, c := range t.Cores {
		if len(c.CPUs.And(set)) > 0 {
			n++
		}
	}
	return n
}

// CoreOf is the core that runs cpu, or nil.
func (t *Topology) CoreOf(cpu int) *Core {
	for i := range t.Cores {
		if t.Cores[i].CPUs.Has(cpu) {
			return &t.Cores[i]
		}
	}
	return nil
}
