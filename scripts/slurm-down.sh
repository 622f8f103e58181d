#!/bin/bash
# slurm-down.sh stops the one-node Slurm that scripts/slurm-up.sh started
# (slurmd, slurmctld, then munged unless --keep-munge), by the pid files it
# left, and removes its slurm.conf. It refuses while jobs are running,
# since another test run may be using the node; --force stops them too.
set -uo pipefail

dir=${GOBTL_SLURM_DIR:-/var/tmp/gobtl-slurm}
conf=/etc/slurm/slurm.conf
keep_munge=0 force=0
for a in "$@"; do
	case $a in
	--keep-munge) keep_munge=1 ;;
	--force) force=1 ;;
	*) echo "usage: slurm-down.sh [--keep-munge] [--force]" >&2; exit 2 ;;
	esac
done

if [ $force = 0 ] && command -v squeue >/dev/null && [ -n "$(squeue -h 2>/dev/null)" ]; then
	echo "slurm-down: jobs are running (squeue); not stopping Slurm (--force to stop anyway)" >&2
	exit 1
fi

stop() { # pidfile
	local pid
	[ -s "$1" ] || return 0
	pid=$(cat "$1")
	kill "$pid" 2>/dev/null || { rm -f "$1"; return 0; }
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
	rm -f "$1"
}

stop "$dir/slurmd.pid"
stop "$dir/slurmctld.pid"
if [ $keep_munge = 0 ]; then
	stop /run/munge/munged.pid
fi
if [ -e "$conf" ] && grep -q "^# written by gobtl scripts/slurm-up.sh" "$conf"; then
	rm -f "$conf"
fi
echo "slurm-down: stopped"
