// Package topo is where a job's ranks run on a node: the node's CPU
// topology, read from /sys, the placement `gobtl run` makes from it (as
// mpirun's rmaps and binding: --map-by core|numa|socket, --bind-to
// core|numa|socket|none), and a rank's own view of its binding, whoever
// made it.
//
// The topology comes from Linux's /sys (cpu/online,
// cpu/cpuN/topology/{physical_package_id,core_id,thread_siblings_list},
// node/nodeN/cpulist), not hwloc: a node's cores, hardware threads,
// sockets and NUMA nodes are all that placement needs, and a pure-Go
// reader keeps `go build` free of cgo and build tags (and GOARCH=386 vet
// working), while tests give it fake trees (testdata: 2 sockets × 4 cores
// × 2 threads with a NUMA node each; 1 socket of 4 cores in 2 NUMA nodes).
// What hwloc adds — caches, PCI locality, Windows and BSD — placement
// does not use.
//
// A launcher places within the CPUs it was given: its own affinity mask,
// which the kernel already intersects with its cgroup's cpuset, so taskset
// and Slurm's or a container's cpuset are both honoured (Topology.Within).
// Ranks map onto cores, one rank per core and not per hardware thread; a
// rank bound to its core may run on all that core's threads. With more
// ranks than cores the default binds nothing: oversubscribed ranks share
// every CPU and yield while they wait (pml's back-off), and the launcher
// says so; a binding asked for explicitly is then an error
// (ErrOversubscribed), as mpirun's is.
//
// A rank never binds itself: under mpirun or srun the engine's binding
// stands, and Self only reads it (the affinity it started with), with the
// CPUs the job's ranks on its node share — `gobtl run`'s own mask
// (EnvNodeCPUs), else the cgroup's cpuset, else the online CPUs — so that
// a rank knows whether its node's ranks each own a core (Binding.OwnsCore)
// without being told.
package topo
