package launch

import "testing"

// A rank's abort report is the job's first failure unless another failed
// first; it replaces its own rank's failed exit, which the launcher can
// reap before it reads the report that explains it.
func TestAnAbortReportExplainsItsRanksExit(t *testing.T) {
	abort := Abort{Rank: 0, Msg: `flow_control policy "extoll_dynamic" (stack.hcl:3:1): plugin failed`}
	for _, c := range []struct {
		name  string
		res   Result
		blame bool
	}{
		{"nothing failed yet", Result{}, true},
		{"its own rank exited first", Result{First: &Exit{Rank: 0, Code: 2}, Status: 2}, true},
		{"another rank failed first", Result{First: &Exit{Rank: 1, Code: 2}, Status: 2}, false},
		{"its rank aborted already", Result{First: &Exit{Rank: 0, Abort: "earlier"}, Status: 1}, false},
		{"the job timed out", Result{Reason: "timed out", Status: StatusTimeout}, false},
	} {
		res := c.res
		if got := res.blame(abort, 42); got != c.blame {
			t.Errorf("%s: blame = %v", c.name, got)
			continue
		}
		if c.blame && (res.First.Abort != abort.Msg || res.First.Pid != 42 || res.Status != 1) {
			t.Errorf("%s: first failure %+v, status %d", c.name, *res.First, res.Status)
		}
		if !c.blame && res.First != c.res.First {
			t.Errorf("%s: the first failure changed to %+v", c.name, *res.First)
		}
	}
}
