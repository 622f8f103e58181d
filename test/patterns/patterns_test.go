package patterns_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/test/patterns"
)

// runAll runs the pattern on n goroutine ranks over the default stack and
// returns every rank's stats.
func runAll(t *testing.T, n int, name string, o patterns.Options, opts gobtl.Options, wrap func(c *gobtl.Comm) patterns.Comm) ([]*patterns.Stats, error) {
	t.Helper()
	stats := make([]*patterns.Stats, n)
	var mu sync.Mutex
	err := gobtl.RunLocal(context.Background(), n, opts, func(c *gobtl.Comm) error {
		var pc patterns.Comm = c
		if wrap != nil {
			pc = wrap(c)
		}
		st, err := patterns.Run(pc, name, o)
		if err != nil {
			return err
		}
		mu.Lock()
		stats[c.Rank()] = st
		mu.Unlock()
		return nil
	})
	return stats, err
}

func TestSmoke(t *testing.T) {
	for _, name := range patterns.Names() {
		t.Run(name, func(t *testing.T) {
			t0 := time.Now()
			stats, err := runAll(t, 8, name, patterns.Options{Iters: 2, Scale: 0.01, Compute: -1}, gobtl.Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var m int64
			for _, s := range stats {
				m += s.TotalMsgs()
			}
			t.Logf("%s: %d msgs in %v", name, m, time.Since(t0))
		})
	}
}
