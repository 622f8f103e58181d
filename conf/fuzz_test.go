package conf_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtl/gobtl/conf"
)

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and
// every error it reports must be a diagnostic with a position in the file
// (the only diagnostics without one are about --var, which this does not
// use).
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("examples/*.hcl")
	more, _ := filepath.Glob("testdata/*.hcl")
	for _, p := range append(seeds, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(pluginPolicy))
	f.Add([]byte("btl \"testnet\" \"n0\" {\n  queue { size = \"1KiB\" }\n  tuning { retry { count = 1 } }\n  labels = { a = \"b\" }\n}\n"))
	f.Add([]byte("variable \"x\" { default = [1, {a = 2}] }\njob { eager_limit = var.x[1].a }\n"))
	f.Add([]byte("job { eager_limit = \"${\""))
	opts := conf.Options{
		LookupEnv:   noEnv,
		CheckPolicy: fakeHost(nil),
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, diags := conf.LoadSources(opts, conf.Source{Name: "fuzz.hcl", Bytes: src})
		if c == nil {
			t.Fatal("nil Config")
		}
		for _, d := range diags {
			if d.Subject == nil || d.Subject.Filename != "fuzz.hcl" {
				t.Fatalf("diagnostic without a position in the file: %q", conf.FormatDiagnostic(d))
			}
		}
		if !diags.HasErrors() {
			// A clean configuration renders and loads back.
			var out []byte
			w := &sliceWriter{&out}
			if err := c.WriteHCL(w); err != nil {
				t.Fatal(err)
			}
			if _, diags := conf.LoadSources(opts, conf.Source{Name: "shown.hcl", Bytes: out}); diags.HasErrors() {
				t.Fatalf("shown configuration does not load:\n%s\n%q", out, render(diags))
			}
			if _, err := c.MarshalJSON(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

type sliceWriter struct{ b *[]byte }

func (w *sliceWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }
