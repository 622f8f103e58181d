package conf_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/conf"
)

func TestEveryExampleLoadsWithoutDiagnostics(t *testing.T) {
	files, err := filepath.Glob("examples/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, diags := conf.Load(conf.Options{LookupEnv: noEnv}, f)
			if len(diags) > 0 {
				t.Fatalf("diagnostics:\n%s", strings.Join(render(diags), "\n"))
			}
			if len(c.BTLs) == 0 {
				t.Fatal("a complete stack needs at least one BTL")
			}
		})
	}
}

func TestTheDefaultExampleSpellsOutTheDefaults(t *testing.T) {
	c, diags := conf.Load(conf.Options{LookupEnv: noEnv}, "examples/default.hcl")
	if len(diags) > 0 {
		t.Fatal(render(diags))
	}
	j := c.Job
	j.Progress.SpinSet, j.Progress.YieldSet = false, false // the file sets what the defaults are
	if !reflect.DeepEqual(j, conf.DefaultJob()) {
		t.Fatalf("default.hcl job = %+v\nDefaultJob()     %+v", j, conf.DefaultJob())
	}
	// Every job parameter that has a default appears in the file, so the
	// file stays the documentation of the defaults.
	text, _ := os.ReadFile("examples/default.hcl")
	for _, p := range conf.JobParams {
		if p.Default != "" && !strings.Contains(string(text), p.Name+" ") {
			t.Errorf("default.hcl does not spell out %s", p.Name)
		}
	}
}
