#!/bin/bash
# slurm-up.sh brings up a one-node Slurm on this host for gobtl's engine
# tests and for trying `srun` by hand: Debian's slurmctld, slurmd and
# munge, installed when missing, a slurm.conf naming this host with 16 task
# slots on however many cores it has (the tests oversubscribe 2 cores), and
# no cgroups or systemd (proctrack/linuxproc, task/none; the daemons are
# started directly, in the background).
#
# It is idempotent and shared: a second run, or a run while another test's
# job is on the node, finds the daemons up and leaves them alone; runs are
# serialised by a lock. It ends when the node is ready (idle, or busy with
# another run's job) or fails after a bounded wait.
#
# Environment: GOBTL_SLURM_DIR (state, spool and logs; default
# /var/tmp/gobtl-slurm), GOBTL_SLURM_WAIT (seconds to wait, default 60).
# scripts/slurm-down.sh stops what this started.
set -euo pipefail

dir=${GOBTL_SLURM_DIR:-/var/tmp/gobtl-slurm}
wait_s=${GOBTL_SLURM_WAIT:-60}
conf=/etc/slurm/slurm.conf
marker="# written by gobtl scripts/slurm-up.sh"

die() { echo "slurm-up: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts the daemons)"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
	command -v apt-get >/dev/null || die "install slurmctld slurmd slurm-client munge"
	echo "slurm-up: installing slurmctld slurmd slurm-client munge" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi

mkdir -p "$dir"
# The daemons are started with the lock's descriptor closed (9>&-), or
# they would hold it for good.
exec 9>"$dir/lock"
flock -w "$wait_s" 9 || die "another slurm-up.sh holds $dir/lock"

node=$(hostname -s)
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# munge: the key comes with Debian's package; the daemon runs as its user.
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
	[ -s /etc/munge/munge.key ] || { mungekey --create --force >/dev/null 2>&1 || /usr/sbin/create-munge-key -f; chown munge:munge /etc/munge/munge.key; }
	install -d -o munge -g munge -m 0755 /run/munge
	runuser -u munge -- /usr/sbin/munged 9>&-
	for _ in $(seq 50); do munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
	munge -n </dev/null | unmunge >/dev/null || die "munged did not start"
fi

mkdir -p "$dir/ctld" "$dir/spool" /etc/slurm
cat >"$dir/slurm.conf" <<EOF
$marker ($dir); scripts/slurm-down.sh stops it.
ClusterName=gobtl
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No systemd or cgroups here: processes are tracked through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# A job's processes end together: a failing task ends the step at once.
KillOnBadExit=1
KillWait=5
InactiveLimit=0
MinJobAge=30
# 16 task slots on however many cores there are: the tests run up to 16
# ranks on 2 cores. config_overrides lets slurmd believe this file.
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF

ctld_up() { alive "$dir/slurmctld.pid" && scontrol ping 2>/dev/null | grep -q UP; }

if [ -e "$conf" ] && ! grep -q "^$marker" "$conf"; then
	die "$conf was not written by this script; move it away or run these tests on a machine without it"
fi
if ! cmp -s "$dir/slurm.conf" "$conf"; then
	if ctld_up && [ -n "$(squeue -h 2>/dev/null)" ]; then
		echo "slurm-up: jobs are running; keeping the running configuration" >&2
	else
		"$(dirname "$0")/slurm-down.sh" --keep-munge >/dev/null 2>&1 9>&- || true
		cp "$dir/slurm.conf" "$conf"
	fi
fi

if ! alive "$dir/slurmctld.pid"; then
	slurmctld 9>&-
fi
for _ in $(seq $((wait_s * 10))); do ctld_up && break; sleep 0.1; done
ctld_up || die "slurmctld did not answer within ${wait_s}s; see $dir/slurmctld.log"

if ! alive "$dir/slurmd.pid"; then
	slurmd 9>&-
fi

state=""
for _ in $(seq $((wait_s * 10))); do
	state=$(sinfo -h -n "$node" -o %t 2>/dev/null | head -1)
	case $state in
	idle | mix | alloc | comp) break ;;
	down* | drain* | drng*)
		scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true ;;
	esac
	sleep 0.1
done
case $state in
idle | mix | alloc | comp) ;;
*) die "node $node is '$state' after ${wait_s}s; see $dir/slurmd.log and $dir/slurmctld.log" ;;
esac
echo "slurm-up: node $node is $state ($(srun --mpi=list 2>&1 | grep -Eo 'pmix|pmi2' | sort -u | tr '\n' ' '| sed 's/ $//') for --mpi)"
