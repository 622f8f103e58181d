package msgtest

import (
	"fmt"
	"time"
)

// Poll looks at cond until it holds, and returns an error naming what
// if it has not within d. Between two looks it calls every progress
// function (a module's Progress, say: what makes cond come true in a
// single-threaded test); without one it sleeps a millisecond, for a cond
// that another goroutine or process makes true.
func Poll(what string, d time.Duration, cond func() bool, progress ...func() int) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", d, what)
		}
		for _, p := range progress {
			p()
		}
		if len(progress) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// T is what Until needs of a test: a testing.TB, or a harness's
// narrower view of one.
type T interface {
	Helper()
	Fatal(args ...any)
}

// Until is Poll that fails t, for the test's own goroutine.
func Until(t T, what string, d time.Duration, cond func() bool, progress ...func() int) {
	t.Helper()
	if err := Poll(what, d, cond, progress...); err != nil {
		t.Fatal(err)
	}
}
