package experiment

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
)

// Cond is the condition a measured value must meet for the paper's trend
// to count as reproduced; its String is the threshold printed beside it.
type Cond struct {
	op       string // ">=", "<=", "~"
	ref, tol float64
}

// AtLeast is value >= ref.
func AtLeast(ref float64) Cond { return Cond{op: ">=", ref: ref} }

// AtMost is value <= ref.
func AtMost(ref float64) Cond { return Cond{op: "<=", ref: ref} }

// Within is |value − ref| <= tol.
func Within(ref, tol float64) Cond { return Cond{op: "~", ref: ref, tol: tol} }

// Holds reports whether v meets c; NaN meets nothing.
func (c Cond) Holds(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	switch c.op {
	case ">=":
		return v >= c.ref
	case "<=":
		return v <= c.ref
	case "~":
		return math.Abs(v-c.ref) <= c.tol
	}
	return false
}

func (c Cond) String() string {
	if c.op == "~" {
		return fmt.Sprintf("%s ± %s", num(c.ref), num(c.tol))
	}
	return c.op + " " + num(c.ref)
}

func num(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.4g", v), ".0") }

// Check is one trend of a paper set against what this run measured.
type Check struct {
	Step  string `json:"step"`
	Mode  string `json:"mode"` // "builtin" or "plugin": how the policies ran
	Table string `json:"table"`
	Row   string `json:"row"`
	// Trend is the paper's statement, Value the quantity measured for it,
	// Threshold the condition it must meet.
	Trend      string  `json:"trend"`
	Value      float64 `json:"value"`
	Threshold  string  `json:"threshold"`
	Reproduced bool    `json:"reproduced"`
	// Unshown says why this machine cannot show the trend (then the check
	// is neither reproduced nor failed).
	Unshown string `json:"unshown,omitempty"`
}

// Verdict is how a row shows the check.
func (c Check) Verdict() string {
	switch {
	case c.Unshown != "":
		return "not shown here"
	case c.Reproduced:
		return fmt.Sprintf("reproduced (%s %s)", num(c.Value), c.Threshold)
	}
	return fmt.Sprintf("NOT reproduced (%s, want %s)", num(c.Value), c.Threshold)
}

// Check records whether value meets cond, the paper's trend for one row
// of one table, and returns the verdict for the row to print.
func (e *Env) Check(table, row, trend string, value float64, cond Cond) string {
	c := Check{Step: e.step, Mode: e.Mode(), Table: table, Row: row, Trend: trend, Value: value, Threshold: cond.String(), Reproduced: cond.Holds(value)}
	e.checks = append(e.checks, c)
	return c.Verdict()
}

// Unshown records a trend this machine cannot show, and why (too few
// cores, no reference installed); it returns the verdict to print.
func (e *Env) Unshown(table, row, trend, why string) string {
	c := Check{Step: e.step, Mode: e.Mode(), Table: table, Row: row, Trend: trend, Value: math.NaN(), Unshown: why}
	e.checks = append(e.checks, c)
	return c.Verdict() + ": " + why
}

// Checks returns the checks recorded so far.
func (e *Env) Checks() []Check { return slices.Clone(e.checks) }

// summary prints how many trends were reproduced, per mode, and lists
// those that were not.
func (e *Env) summary() {
	if len(e.checks) == 0 {
		return
	}
	w := e.Out
	fmt.Fprintf(w, "== Summary: the papers' trends on this machine (%s)\n", e.loadNote())
	if l, busy := shared(e.loadAt, runtime.NumCPU()); busy {
		fmt.Fprintf(w, "The machine was shared: load %.1f on %d CPUs, more than twice the cores. Trends measured in time\n"+
			"(latency, bandwidth, run time, overlap) may fail from that alone; counts (credits, buffers,\n"+
			"messages, bytes) do not depend on it.\n", l, runtime.NumCPU())
	}
	modes := []string{}
	for _, c := range e.checks {
		if !slices.Contains(modes, c.Mode) {
			modes = append(modes, c.Mode)
		}
	}
	for _, m := range modes {
		yes, no, unshown := 0, 0, 0
		for _, c := range e.checks {
			switch {
			case c.Mode != m:
			case c.Unshown != "":
				unshown++
			case c.Reproduced:
				yes++
			default:
				no++
			}
		}
		fmt.Fprintf(w, "policies %s: %d reproduced, %d not reproduced, %d not shown on this machine\n", m, yes, no, unshown)
	}
	for _, c := range e.checks {
		if !c.Reproduced || c.Unshown != "" {
			fmt.Fprintf(w, "  [%s] %s / %s: %s — %s\n", c.Mode, c.Table, c.Row, c.Verdict(), c.Trend)
		}
	}
}

// shared reports the higher one-minute load of at (as loadNow prints
// it) and whether it was above twice cpus: other work then held the cores
// the ranks and the software NICs need, and timings say more about it than
// about the papers' mechanisms.
func shared(at [2]string, cpus int) (float64, bool) {
	high := 0.0
	for _, s := range at {
		var l float64
		if _, err := fmt.Sscan(s, &l); err == nil {
			high = max(high, l)
		}
	}
	return high, high > 2*float64(cpus)
}

// Summary counts reproduced and not reproduced checks over every mode.
type Summary struct {
	Reproduced    int `json:"reproduced"`
	NotReproduced int `json:"not_reproduced"`
	NotShown      int `json:"not_shown"`
}

func (e *Env) counts() Summary {
	var s Summary
	for _, c := range e.checks {
		switch {
		case c.Unshown != "":
			s.NotShown++
		case c.Reproduced:
			s.Reproduced++
		default:
			s.NotReproduced++
		}
	}
	return s
}
