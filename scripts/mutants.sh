#!/usr/bin/env bash
# mutants.sh: a mutation check over the papers' rules. Each mutant below is
# a one-line change that breaks one rule a paper states; the script copies
# the tree (tracked and untracked files, never bin/ or .git) to a temporary
# directory, applies one mutant at a time there — the working tree is never
# touched — runs the tests named for it, and expects them to fail. It
# prints a table, caught or missed, and exits 1 if any mutant was missed or
# did not apply (its line is gone: the table must follow the code). First it
# runs the same tests on the unmutated copy: they must pass there, so that
# only the mutant can be what fails them.
#
#   scripts/mutants.sh            every mutant
#   scripts/mutants.sh alpha due  the mutants whose id is given
#
# A mutant is one line of the table below, fields separated by " ~~ ":
#   id ~~ rule (paper section) ~~ file ~~ old text ~~ new text ~~ package ~~ -run regex
# The old text must occur exactly once in the file.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

mutants=$(cat <<'EOF'
alpha ~~ seed 001 §4.5 Eq. 4: α keeps history (not Eq. 3) ~~ policies/sched/sched.go ~~ w[sub] = (1-p.alpha)*w[sub] + p.alpha*sumW*(p.msgBytes[i]/p.msgTimes[i])/sumRate ~~ w[sub] = sumW*(p.msgBytes[i]/p.msgTimes[i])/sumRate ~~ ./policies/sched/ ~~ TestAdaptive
window ~~ seed 001 §4.4: W messages per subchannel ~~ pml/sched.go ~~ if s.inWin++; s.inWin >= s.cfg.Window { ~~ if s.inWin++; s.inWin >= 1 { ~~ ./pml/ ~~ WindowRoundRobin
esn ~~ seed 001 §5: ESN and out-of-order queue ~~ pml/recv.go ~~ if h.PSN != p.esn { ~~ if false { ~~ ./pml/ ~~ MultirailRandomMixes|OutOfOrder
due ~~ seed 000 §4.2: explicit credits at the threshold ~~ btl/ib/credits.go ~~ return c.owed > 0 && c.owed >= min(threshold, c.target) ~~ return c.owed > 0 && c.owed > min(threshold, c.target) ~~ ./btl/ib/ ~~ ExplicitCreditsAreDue
spend ~~ seed 000 §4.2: one credit per frame ~~ btl/ib/credits.go ~~ func (c *credits) spend() { c.avail-- } ~~ func (c *credits) spend() {} ~~ ./btl/ib/ ~~ StaticScheme|EveryFrameThatWaited
backlogbit ~~ seed 000 §4.3: the backlog bit on the frame that waited for a credit ~~ btl/ib/credits.go ~~ c.held, c.draining = false, true ~~ c.held, c.draining = false, true; return 0 ~~ ./btl/ib/ ~~ EveryFrameThatWaited|StaticScheme
backlogall ~~ seed 000 §4.3: the bit on every message that waited, not one per stall ~~ btl/ib/credits.go ~~ if !queued || !c.draining { ~~ if true { ~~ ./btl/ib/ ~~ Backlog
linear ~~ seed 000 §5: dynamic growth, linear by step ~~ policies/flowcontrol/ib_dynamic/dynamic.go ~~ next = min(base+p.Step, p.Max) ~~ next = min(base+2*p.Step, p.Max) ~~ ./policies/flowcontrol/ib_dynamic/ ~~ .
buckets ~~ seed 002 §3: B-SRQ buckets R_i = 2^(8+i) ~~ policies/recvbuf/bsrq/bsrq.go ~~ r := l.MinBucket << i ~~ r := l.MinBucket << (i + 1) ~~ ./policies/recvbuf/bsrq/ ~~ .
eq1 ~~ seed 003 §5.2 Eq. 1: threshold = quota div (k+1) + 1 ~~ btl/extoll/velo/engine.go ~~ func Threshold(quota, creditSlots int) int { return quota/(creditSlots+1) + 1 } ~~ func Threshold(quota, creditSlots int) int { return quota/creditSlots + 1 } ~~ ./btl/extoll/velo/ ~~ Table1
eq2 ~~ seed 003 §5.2 Eq. 2: data region >= credit region ~~ btl/extoll/velo/credits.go ~~ if c.data < creditRegion { ~~ if c.data < 0 { ~~ ./btl/extoll/velo/ ~~ Equation2
piggyroom ~~ seed 003 §5.4: piggybacked credits take the last 2 bytes ~~ btl/extoll/velo/engine.go ~~ const PiggybackRoom = nic.MaxPayload - 2 ~~ const PiggybackRoom = nic.MaxPayload ~~ ./btl/extoll/velo/ ~~ Piggyback
static ~~ seed 003 §6.5: a victim keeps its static slots ~~ btl/extoll/velo/dynamic.go ~~ want := min(max(v, int64(c.static)), int64(c.maxQuota)) ~~ want := min(v, int64(c.maxQuota)) ~~ ./btl/extoll/velo/ ~~ Victim
blocked ~~ seed 003 §6.5.2: blocked sender gets one credit only below static ~~ btl/extoll/velo/receiver.go ~~ if r.current < int32(c.static) { ~~ if true { ~~ ./btl/extoll/velo/ ~~ Blocked
interrupts ~~ seed 004 §4.3: interrupts only while receives are pending ~~ pml/async.go ~~ if a.armed || (e.pendingRecvs == 0 && e.pendingWork == 0 && !e.readsInFlight()) { ~~ if a.armed { ~~ ./pml/ ~~ Async
tokens ~~ seed 004 §4.2: RDMA-read token bucket ~~ pml/queue.go ~~ if st.get && (s.readTokens == 0 || !s.readQ.Empty()) { ~~ if st.get && !s.readQ.Empty() { ~~ ./pml/ ~~ TokenBucket
EOF
)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gobtl-mutants-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The tree as it is now, committed or not: tracked and untracked files that
# git does not ignore.
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C "$tmp" -xf -

want=" $* "

# The baseline: the tests named for the selected mutants must pass on the
# unmutated tree, or a failure would be counted as a catch. One run per
# package, its mutants' -run patterns joined.
declare -A runs=()
while IFS= read -r line; do
	[ -z "$line" ] && continue
	id=$(awk -F ' ~~ ' '{print $1}' <<<"$line")
	[ $# -gt 0 ] && [[ "$want" != *" $id "* ]] && continue
	pkg=$(awk -F ' ~~ ' '{print $6}' <<<"$line")
	run=$(awk -F ' ~~ ' '{print $7}' <<<"$line")
	runs[$pkg]="${runs[$pkg]:+${runs[$pkg]}|}$run"
done <<<"$mutants"
for pkg in "${!runs[@]}"; do
	if ! (cd "$tmp" && go test -count=1 -timeout 180s -run "${runs[$pkg]}" "$pkg" >"$tmp/baseline.log" 2>&1); then
		echo "mutants: the unmutated tree fails $pkg -run '${runs[$pkg]}':"
		tail -20 "$tmp/baseline.log"
		exit 1
	fi
	echo "baseline  $pkg passes -run '${runs[$pkg]}'"
done

printf '%-11s %-8s %8s  %s\n' mutant result time rule
missed=0
while IFS= read -r line; do
	[ -z "$line" ] && continue
	id=$(awk -F ' ~~ ' '{print $1}' <<<"$line")
	if [ $# -gt 0 ] && [[ "$want" != *" $id "* ]]; then
		continue
	fi
	rule=$(awk -F ' ~~ ' '{print $2}' <<<"$line")
	file=$(awk -F ' ~~ ' '{print $3}' <<<"$line")
	old=$(awk -F ' ~~ ' '{print $4}' <<<"$line")
	new=$(awk -F ' ~~ ' '{print $5}' <<<"$line")
	pkg=$(awk -F ' ~~ ' '{print $6}' <<<"$line")
	run=$(awk -F ' ~~ ' '{print $7}' <<<"$line")
	orig="$tmp/$file.orig"
	cp "$tmp/$file" "$orig"
	n=$(OLD="$old" NEW="$new" perl -0777 -i -pe '$n = s/\Q$ENV{OLD}\E/$ENV{NEW}/g; END { print STDERR $n+0 }' "$tmp/$file" 2>&1 >/dev/null)
	if [ "$n" != 1 ]; then
		printf '%-11s %-8s %8s  %s (%s: the old text occurs %s times)\n' "$id" "NO-APPLY" - "$rule" "$file" "$n"
		missed=$((missed + 1))
		mv "$orig" "$tmp/$file"
		continue
	fi
	start=$(date +%s)
	if (cd "$tmp" && go test -count=1 -timeout 120s -run "$run" "$pkg" >"$tmp/$id.log" 2>&1); then
		result=MISSED
		missed=$((missed + 1))
	else
		result=caught
		if grep -q '\[build failed\]\|setup failed' "$tmp/$id.log"; then
			result=NOBUILD
			missed=$((missed + 1))
		fi
	fi
	printf '%-11s %-8s %7ss  %s\n' "$id" "$result" "$(($(date +%s) - start))" "$rule"
	if [ "$result" != caught ] && [ -n "${MUTANTS_VERBOSE:-}" ]; then
		tail -20 "$tmp/$id.log"
	fi
	mv "$orig" "$tmp/$file"
done <<<"$mutants"
if [ "$missed" -gt 0 ]; then
	echo "mutants: $missed not caught"
	exit 1
fi
echo "mutants: every one caught"
