package engines

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

var failingAt = regexp.MustCompile(`rank \d+: failing at (\d+)`)

// A rank that exits non-zero, or calls Comm.Abort, ends the whole job
// under mpirun and srun with a non-zero status, while the other ranks
// wait in a barrier that cannot complete: the engine (or the ranks
// noticing their peer is gone) must end them. The job has the hard
// deadline of every test; how long it took from the failure to the
// engine's exit is logged, not judged (the issue asks for 5 s).
func TestAFailingRankEndsTheJob(t *testing.T) {
	for _, e := range []engine{mpirun, srunPMIx, srunPMI2} {
		for _, how := range []struct {
			name string
			args []string
		}{
			{"exit", []string{"-fail", "2", "-exit", "3"}},
			{"abort", []string{"-fail", "2", "-abort"}},
		} {
			t.Run(e.name+"/"+how.name, func(t *testing.T) {
				e.need(t)
				r := run(t, e, 4, nil, bin("rank"), how.args...)
				inits(t, r, 4)
				if r.status == 0 {
					t.Fatalf("the job ended with status 0 after rank 2 failed (%s):\n%s", how.name, r)
				}
				m := failingAt.FindStringSubmatch(r.stderr)
				if m == nil {
					t.Fatalf("rank 2 did not say when it failed:\n%s", r)
				}
				at, _ := strconv.ParseInt(m[1], 10, 64)
				t.Logf("%s, rank 2 %s: the job ended with status %d %v after the failure", e.name, how.name, r.status, r.ended.Sub(time.Unix(0, at)).Round(time.Millisecond))
			})
		}
	}
}
