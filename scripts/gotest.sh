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
set -uo pipefail
GO=${GO:-go}
log=$(mktemp "${TMPDIR:-/tmp}/gotest.XXXXXX")
trap 'rm -f "$log"' EXIT
"$GO" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && exit 0
echo
echo "=== gotest.sh: go test $* failed ($rc); what failed:"
grep -E '^(--- FAIL|FAIL|panic:)|^\s+--- FAIL' "$log" | head -40
grep -A12 -E '^\s+running tests:' "$log" | grep -E 'running tests:|^\s+Test' | head -20
# Each goroutine's stack is a paragraph; print those of the tests.
awk 'BEGIN { RS = "" } /created by testing\.\(\*T\)\.Run/ && n < 4 { n++; print; print "" }' "$log" | head -120
exit "$rc"
