#!/usr/bin/env bash
# Compare gobtl with Open MPI on this host in one run: shared memory
# against ob1 + vader, ib/softrc against ob1 + tcp, and one policy as a
# plugin against built in (bench/compare says which metrics and targets);
# -set ofi: btl ofi against Open MPI's btl/ofi and mtl/ofi.
# Installs Open MPI if missing, builds bench/c/osu.c (the same algorithms
# as `gobtl bench`), gobtl and the plugins, then alternates the runs and
# prints every ratio.
#   bench/compare-ompi.sh [-set p2p|sm|softrc|plugin|coll|ofi] [-reps N] [-np N] [-iters N]
#                         [-c stack.hcl] [-softrc-c stack.hcl] [-coll-c stack.hcl] [-plots DIR]
#                         [-plugin-kind K -plugin-policy P -plugin-btl 'btl "sm" "x" {}']
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
# With libfabric-dev, gobtl has btl ofi (the ofi group needs it).
tags=
if pkg-config --exists libfabric 2>/dev/null; then tags=ofi; fi
go build -tags "$tags" -o bin/gobtl ./cmd/gobtl
make -s plugins >/dev/null
exec go run ./bench/compare -gobtl bin/gobtl -osu bin/osu-ompi "$@"
