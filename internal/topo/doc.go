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
//
// A rank's Go runtime fits its binding. Go sets GOMAXPROCS from the
// affinity mask a process starts with — a rank bound before exec starts
// with its core's threads as its Ps — and from Go 1.25 follows later
// changes of the mask within a second while the program runs (checked
// with Go 1.26: 2 → 1 after `taskset -a -p`, 1 → 2 back; NumCPU stays
// what it was at start). One P on a one-thread core is right where the
// rank moves its own messages (self, sm: no goroutine to wait for; a
// second P is a second thread spinning for work on the same CPU): two
// ranks bound on a loaded 2-CPU node, 5 alternating runs, sm latency 8 B
// 0.34–2.1 µs with one P, 0.34–3.2 with two, 2.3–152 unbound; allreduce
// 8 B 1.1–5.4, 1.9–5.5 and 5–187. Where the rank waits on goroutines —
// the software NICs of btl "ib" (softrc) and btl "extoll", the progress
// goroutine of rdma_read_async — one P runs them only when the waiter's
// back-off sleeps: ib's 1 MiB latency took 2077–2234 µs with one P and
// 690–1296 with two (8 B: 16–113 against 7.6–15 µs). So gobtl.Init
// gives such a stack 2 Ps on a one-CPU binding and leaves every other
// GOMAXPROCS as Go set it (or as the user's environment says). The GC's
// background worker takes a fraction of the one P; the hot paths allocate
// nothing, so it rarely runs.
//
// Plugin processes (policies in their own process) are forked by their
// rank and inherit its mask, and run GOMAXPROCS=1 (package plugins): they
// stay on their rank's core. Their work is the rank's own — batches of
// its events — and on its core it can delay only that rank, never a
// neighbour bound to another core, which a plugin free to roam the node
// would preempt: the millisecond stalls issue 29 measured come from such
// interruptions.
package topo
