package bench

import _ "embed"

// OSUSource is bench/c/osu.c: the benchmarks of this package (latency,
// bw, bibw, msgrate) written against MPI with the same algorithms and JSON
// report, embedded so that a gobtl command can build it with an MPI's
// compiler and measure that MPI as its reference in the same run.
//
//go:embed c/osu.c
var OSUSource []byte
