package gobtl

import (
	"math"
	"testing"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/pml"
)

// Ranks that outnumber their node's CPUs spin briefly and then yield,
// unless the stack chose the spin (or the yields) itself.
func TestOversubscribedRanksYieldUnlessTheStackSaysOtherwise(t *testing.T) {
	def := pml.Backoff{Spin: 2000, Yield: 50}
	for _, c := range []struct {
		name        string
		p           conf.Progress
		ranks, cpus int
		want        pml.Backoff
	}{
		{"fits", conf.Progress{}, 2, 2, def},
		{"oversubscribed", conf.Progress{}, 4, 2, pml.Backoff{Spin: oversubscribedSpin, Yield: math.MaxInt32}},
		{"the stack's spin", conf.Progress{SpinSet: true}, 4, 2, def},
		{"the stack's yields", conf.Progress{YieldSet: true}, 4, 2, pml.Backoff{Spin: oversubscribedSpin, Yield: 50}},
	} {
		if got := oversubscribed(def, c.p, c.ranks, c.cpus); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A rank whose node's ranks each have a core spins while it keeps it
// (OwnCore); ranks that share cores — hardware threads of one core, or
// more ranks than CPUs — do not.
func TestRanksThatOwnTheirCoresSpinWhileTheyKeepThem(t *testing.T) {
	def := pml.Backoff{Spin: 2000, Yield: 50}
	for _, c := range []struct {
		name               string
		ranks, cpus, cores int
		want               pml.Backoff
	}{
		{"a core each", 2, 2, 2, pml.Backoff{Spin: 2000, Yield: 50, OwnCore: true}},
		{"fewer ranks than cores", 3, 16, 16, pml.Backoff{Spin: 2000, Yield: 50, OwnCore: true}},
		{"hardware threads of shared cores", 4, 4, 2, def},
		{"oversubscribed", 4, 2, 2, pml.Backoff{Spin: oversubscribedSpin, Yield: math.MaxInt32}},
	} {
		if got := placedBackoff(def, conf.Progress{}, c.ranks, c.cpus, c.cores); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A stack that spins long on a node with more ranks than CPUs is warned
// about; one that spins briefly, yields at once or fits its CPUs is not.
func TestALongSpinOnAnOversubscribedNodeIsWarnedAbout(t *testing.T) {
	for _, c := range []struct {
		name        string
		p           conf.Progress
		spin        int
		ranks, cpus int
		warn        bool
	}{
		{"sm.hcl's spin, 4 ranks on 2 CPUs", conf.Progress{SpinSet: true}, 200000, 4, 2, true},
		{"the same on 4 CPUs", conf.Progress{SpinSet: true}, 200000, 4, 4, false},
		{"a short spin", conf.Progress{SpinSet: true}, spinWarnPolls, 4, 2, false},
		{"the default's spin, made 0", conf.Progress{}, oversubscribedSpin, 4, 2, false},
	} {
		b := oversubscribed(pml.Backoff{Spin: c.spin, Yield: 50}, c.p, c.ranks, c.cpus)
		if w := spinWarning(b, c.p, c.ranks, c.cpus); (w != "") != c.warn {
			t.Errorf("%s: warning %q, want one: %v", c.name, w, c.warn)
		}
	}
}

// The stack's own progress settings are told apart from the defaults.
func TestTheProgressBlockSaysWhatItSets(t *testing.T) {
	cfg, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "s.hcl", Bytes: []byte("job {\n progress { spin = 7 }\n}\n")})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if p := cfg.Job.Progress; !p.SpinSet || p.YieldSet || p.Spin != 7 {
		t.Fatalf("progress %+v: want the spin set (7) and the yields not", p)
	}
}

// A job that names no stack file runs the default stack, whose file
// writes spin = 2000 out for show; that must not count as the stack
// choosing it, or ranks that outnumber their node's CPUs would hold the
// CPU 2000 polls long while the rank they wait for cannot run (a 4-rank
// allreduce of 8 B on 2 CPUs: 396 µs against 29 µs, start.go).
func TestWithoutAStackFileOversubscribedRanksYieldAtOnce(t *testing.T) {
	t.Setenv(EnvConfig, "")
	cfg, err := loadConfig(Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	po, err := pmlOptions(cfg.Job)
	if err != nil {
		t.Fatal(err)
	}
	if po.Backoff.Spin != pml.DefaultBackoff.Spin {
		t.Fatalf("the default stack spins %d polls, want pml's default %d", po.Backoff.Spin, pml.DefaultBackoff.Spin)
	}
	if b := oversubscribed(po.Backoff, cfg.Job.Progress, 4, 2); b.Spin != oversubscribedSpin || b.Yield != math.MaxInt32 {
		t.Fatalf("4 ranks on 2 CPUs with no stack file: back-off %+v, want no spin and yields only", b)
	}
}
