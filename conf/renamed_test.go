package conf_test

import (
	"slices"
	"testing"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// The InfiniBand flow-control schemes were called hardware, static and
// dynamic before their names said which transport they serve: a stack file
// that still uses an old name loads, with a warning, as the new one.
func TestAFormerPolicyNameStillLoadsWithAWarning(t *testing.T) {
	for _, c := range []struct{ how, old, now, warning string }{
		{"builtin", "static", "ib_static",
			`s.hcl:3:13: warning: Deprecated flow control policy name "static"; "static" is now called "ib_static"; the old name still loads, but will not for ever.`},
		{"builtin", "hardware", "ib_hardware",
			`s.hcl:3:13: warning: Deprecated flow control policy name "hardware"; "hardware" is now called "ib_hardware"; the old name still loads, but will not for ever.`},
		{"plugin", "dynamic", "ib_dynamic",
			`s.hcl:3:12: warning: Deprecated flow control policy name "dynamic"; "dynamic" is now called "ib_dynamic"; the old name still loads, but will not for ever.`},
	} {
		t.Run(c.how+" "+c.old, func(t *testing.T) {
			src := "btl \"self\" \"self\" {}\npolicy \"flow_control\" {\n  " + c.how + " = \"" + c.old + "\"\n}\n"
			cfg, diags := conf.LoadSources(conf.Options{LookupEnv: noEnv}, file("s.hcl", src))
			if diags.HasErrors() {
				t.Fatalf("the old name does not load: %q", render(diags))
			}
			if got := render(diags); !slices.Contains(got, c.warning) {
				t.Fatalf("diagnostics %q, want the warning %q", got, c.warning)
			}
			p := cfg.Policy(core.KindFlowControl)
			if p.Name != c.now || c.how == "builtin" && (p.Component == nil || p.Component.Name != c.now) {
				t.Fatalf("policy %q (component %v), want %q", p.Name, p.Component, c.now)
			}
		})
	}
}

func TestTheNewNamesLoadWithoutAWarning(t *testing.T) {
	for _, name := range []string{"ib_hardware", "ib_static", "ib_dynamic"} {
		src := "btl \"self\" \"self\" {}\npolicy \"flow_control\" {\n  builtin = \"" + name + "\"\n}\n"
		if _, diags := conf.LoadSources(conf.Options{LookupEnv: noEnv}, file("s.hcl", src)); len(diags) > 0 {
			t.Fatalf("%s: %q", name, render(diags))
		}
	}
}
