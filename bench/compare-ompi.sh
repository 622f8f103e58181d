#!/usr/bin/env bash
# Compare gobtl's shared-memory stack with Open MPI's ob1 + vader on this
# host: install Open MPI if missing, build bench/c/osu.c (the same algorithms
# as `gobtl bench`) and gobtl, then alternate the runs and print ratios.
#   bench/compare-ompi.sh [-set p2p|coll] [-reps N] [-np N] [-iters N] [-c stack.hcl]
#
# Open MPI's commands are called by their full names: with MPICH installed
# too, the unsuffixed mpicc and mpirun follow Debian's alternatives.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mpicc.openmpi >/dev/null || ! command -v mpirun.openmpi >/dev/null; then
	echo "compare-ompi: installing openmpi-bin libopenmpi-dev" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
mkdir -p bin
mpicc.openmpi -O2 -o bin/osu-ompi bench/c/osu.c
go build -o bin/gobtl ./cmd/gobtl
exec go run ./bench/compare -gobtl bin/gobtl -osu bin/osu-ompi "$@"
