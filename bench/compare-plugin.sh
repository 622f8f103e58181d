#!/usr/bin/env bash
# The same job with a policy built in and as a plugin process: the message
# rate of 8-byte messages and the bandwidth of 1 MiB messages between two
# ranks over shared memory (gobtl bench msgrate / bw under gobtl run).
# Runs alternate between the two stacks; the medians are printed, with
# the plugin's cost relative to the built-in.
#
#   bench/compare-plugin.sh                    # adaptive_striping, 9 runs each
#   POLICY=weighted_striping REPS=15 bench/compare-plugin.sh
#   KIND=flow_control POLICY=extoll_static BTL='btl "extoll" "x" {}' bench/compare-plugin.sh
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${KIND:-sched}
policy=${POLICY:-adaptive_striping}
reps=${REPS:-9}
btl=${BTL:-'btl "sm" "local" {}'}
make -s build plugins >/dev/null
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for how in builtin plugin; do
	sel="builtin = \"$policy\""
	[ "$how" = plugin ] && sel="plugin = \"$policy\"
  plugin_dir = \"$PWD/bin/plugins\""
	cat >"$dir/$how.hcl" <<HCL
btl "self" "self" {}
$btl
policy "$kind" {
  $sel
}
HCL
done
run() { # bench size field stack
	bin/gobtl run -np 2 --timeout 120s -c "$4" -- bin/gobtl bench "$1" --sizes "$2" --json | jq -r ".rows[0].$3"
}
for i in $(seq "$reps"); do
	for how in builtin plugin; do
		echo "$how msgrate $(run msgrate 8 msgs_per_s "$dir/$how.hcl")" >>"$dir/results"
		echo "$how bw $(run bw 1MiB mbps "$dir/$how.hcl")" >>"$dir/results"
	done
done
python3 - "$dir/results" "$kind" "$policy" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for how in ("builtin", "plugin"):
    for b in ("msgrate", "bw"):
        v = [float(r[2]) for r in rows if r[0] == how and r[1] == b]
        med[how, b] = statistics.median(v)
        print(f"{sys.argv[2]} {sys.argv[3]:<18} {how:<8} {b:<8} median {med[how, b]:14.1f}  runs {' '.join(f'{x:.0f}' for x in v)}")
for b, unit in (("msgrate", "msg/s (8 B)"), ("bw", "MB/s (1 MiB)")):
    d = (med["plugin", b] / med["builtin", b] - 1) * 100
    print(f"plugin vs builtin, {unit}: {d:+.1f} %")
PY
