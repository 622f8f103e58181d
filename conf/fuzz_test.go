package conf_test

import (
	"os"
	"path/filepath"
	"strings"
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
	// Hostile shapes, small: the bounds must hold for every mutation.
	r := strings.Repeat
	f.Add([]byte("variable \"x\" { default = " + r("[", 70) + r("]", 70) + " }\n"))
	f.Add([]byte("variable \"x\" {\n  default = " + r("!", 70) + "true\n}\n"))
	f.Add([]byte("variable \"x\" {\n  default = " + r("true ? 1 : ", 70) + "2\n}\n"))
	f.Add([]byte("variable \"x\" {\n  default = " + r("1 + ", 70) + "1\n}\n"))
	f.Add([]byte("a = \"" + r("%{if true}", 70) + "x" + r("%{endif}", 70) + "\"\n"))
	f.Add([]byte("a = " + r("<<E\n${", 70) + "1" + r("}\nE\n", 70)))
	f.Add([]byte("variable \"x\" {\n  default = <<-EOT\n  " + r("$${x}", 100) + "\n  EOT\n}\n"))
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
			// A line's worth of each value, a few lines in all.
			if s := conf.FormatDiagnostic(d); len(s) > 2200 {
				t.Fatalf("a diagnostic of %d bytes: %.300q", len(s), s)
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
