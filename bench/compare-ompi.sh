#!/usr/bin/env bash
# Compare gobtl's shared-memory stack with Open MPI's ob1 + vader on this
# host: install Open MPI if missing, build bench/c/osu.c (the same algorithms
# as `gobtl bench`) and gobtl, then alternate the runs and print ratios.
#   bench/compare-ompi.sh [-set p2p|coll] [-reps N] [-np N] [-iters N] [-c stack.hcl]
# Open MPI's commands are taken by their full names (mpicc.openmpi,
# mpirun.openmpi) where Debian installs them, so that another MPI's mpicc
# on the PATH is not picked by mistake; MPICC and MPIRUN override.
set -euo pipefail
cd "$(dirname "$0")/.."
pick() { command -v "$1.openmpi" || command -v "$1" || true; }
MPICC=${MPICC:-$(pick mpicc)}
MPIRUN=${MPIRUN:-$(pick mpirun)}
if [ -z "$MPICC" ] || [ -z "$MPIRUN" ]; then
	echo "compare-ompi: installing openmpi-bin libopenmpi-dev" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
	MPICC=$(pick mpicc) MPIRUN=$(pick mpirun)
fi
mkdir -p bin
"$MPICC" -O2 -o bin/osu-ompi bench/c/osu.c
go build -o bin/gobtl ./cmd/gobtl
exec go run ./bench/compare -gobtl bin/gobtl -osu bin/osu-ompi -mpirun "$MPIRUN" "$@"
