#!/usr/bin/env bash
# gotest.sh ARGS...: go test ARGS, and when it fails, a summary after its
# output that names what failed.
#
# A CI log is often read from its end. A test binary that times out ends
# its output with a dump of every goroutine, newest last — device and
# helper goroutines — while the test that hung and where it waits are at
# the dump's start. So on failure this prints, last: every FAIL and
# panic line, the tests a timeout found running, and the stacks of the
# goroutines the testing package started (the tests themselves).
#
# Each package's tests get 25 minutes, not go test's 10, unless the
# arguments say: on a loaded machine (two CPU hogs on two cores) ./coll
# alone takes 8m52s, against 30 s unloaded — its ranks are goroutines of
# one process, and each of their back-off yields and sleeps gives a hog a
# slice — and a package that is slow, not hung, must not fail for it.
# A hang still ends sooner: the harnesses' own limits (coll's 60 s,
# msgtest's 30 s) fail it with its stacks.
set -uo pipefail
GO=${GO:-go}
log=$(mktemp "${TMPDIR:-/tmp}/gotest.XXXXXX")
trap 'rm -f "$log"' EXIT
timeout=(-timeout 25m)
for a in "$@"; do
	case $a in -timeout | -timeout=* | -test.timeout*) timeout=() ;; esac
done
"$GO" test "${timeout[@]}" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && exit 0
echo
echo "=== gotest.sh: go test $* failed ($rc); what failed:"
grep -E '^(--- FAIL|FAIL|panic:)|^\s+--- FAIL' "$log" | head -40
grep -A12 -E '^\s+running tests:' "$log" | grep -E 'running tests:|^\s+Test' | head -20
# Each goroutine's stack is a paragraph; print those of the tests.
awk 'BEGIN { RS = "" } /created by testing\.\(\*T\)\.Run/ && n < 4 { n++; print; print "" }' "$log" | head -120
exit "$rc"
