package mptest

import (
	"testing"
	"time"
)

// Until polls cond until it holds and fails t if it has not within d.
// Between two looks it calls every progress function (a module's
// Progress, say: what makes cond come true in a single-threaded test);
// without one it sleeps a millisecond, for a cond another goroutine or
// process makes true.
func Until(t testing.TB, what string, d time.Duration, cond func() bool, progress ...func() int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		for _, p := range progress {
			p()
		}
		if len(progress) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}
