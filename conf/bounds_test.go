package conf_test

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/gobtl/gobtl/conf"
)

// hostile loads src with the goroutine stack limited to 16 MiB, so that a
// nesting the bounds miss crashes this test at once (HCL's recursion on
// 50,000 levels needs more) instead of taking a gigabyte first.
func hostile(t *testing.T, src string) []string {
	t.Helper()
	old := debug.SetMaxStack(16 << 20)
	defer debug.SetMaxStack(old)
	_, diags := conf.LoadSources(conf.Options{LookupEnv: noEnv}, conf.Source{Name: "h.hcl", Bytes: []byte(src)})
	return render(diags)
}

// Every shape of nesting that HCL's parser or evaluator recurses on is
// refused 50,000 deep, before HCL parses it, with one error at the line
// and column where it went past the bound.
func TestDeepNestingIsRefusedBeforeParsing(t *testing.T) {
	const n = 50000
	r := strings.Repeat
	// Expressions are a variable's default, which the loader evaluates.
	v := func(expr string) string { return "variable \"x\" {\n  default = " + expr + "\n}\n" }
	for name, src := range map[string]string{
		"brackets":           "a = " + r("[", n) + r("]", n) + "\n",
		"object braces":      "a = " + r("{a=", n) + "1" + r("}", n) + "\n",
		"parentheses":        "a = " + r("(", n) + "1" + r(")", n) + "\n",
		"blocks":             r("b {\n", n) + r("}\n", n),
		"function calls":     "a = " + r("f(", n) + "1" + r(")", n) + "\n",
		"for expressions":    "a = " + r("[for x in ", n) + "y" + r(": x]", n) + "\n",
		"negations":          v(r("!", n) + "true"),
		"minus signs":        v(r("- ", n) + "1"),
		"conditionals":       v(r("true ? 1 : ", n) + "2"),
		"a chain of sums":    v(r("1 + ", n) + "1"),
		"a chain of ors":     v(r("true || ", n) + "true"),
		"interpolations":     "a = " + r("\"${", n) + "1" + r("}\"", n) + "\n",
		"if directives":      "a = \"" + r("%{if true}", n) + "x" + r("%{endif}", n) + "\"\n",
		"heredoc interps":    "a = " + r("<<E\n${", n) + "1" + r("}\nE\n", n),
		"unclosed brackets":  "a = " + r("{a=[", n) + "\n",
		"brackets in a body": "job {\n  eager_limit = " + r("[", n) + "\n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			got := hostile(t, src)
			if len(got) != 1 || !strings.HasPrefix(got[0], "h.hcl:") || !strings.Contains(got[0], "Stack file nested too deeply") ||
				!strings.Contains(got[0], "at most 64 deep") {
				t.Fatalf("got %d diagnostics, want one about the nesting: %.300q", len(got), got)
			}
		})
	}
}

// What nests within the bound loads, and what only looks like nesting —
// brackets and operators in strings, heredocs and comments, dashes in
// names, exponents — does not count.
func TestNestingWithinTheBoundAndLookAlikesLoad(t *testing.T) {
	r := strings.Repeat
	for name, src := range map[string]string{
		"60 brackets":          "variable \"x\" {\n  default = " + r("[", 60) + r("]", 60) + "\n}\n",
		"50 operators":         "variable \"x\" {\n  default = 1" + r(" + 1", 50) + "\n}\n",
		"operators per line":   manyVariables(40),
		"brackets in strings":  "variable \"x\" {\n  default = \"" + r("([{!-?", 1000) + "\"\n}\n",
		"brackets in comments": r("# (((([[[[{{{{ !!!! ----\n", 100) + "/* " + r("((((", 1000) + " */\njob {}\n",
		"a heredoc of text":    "variable \"x\" {\n  default = <<EOT\n" + r("(((( [[[[ {{{{ !!!! ???? \" '\n", 1000) + "EOT\n}\n",
		"dashes in names":      "variable \"" + r("a-", 200) + "b\" {\n  default = 1\n}\njob {\n  eager_limit = var." + r("a-", 200) + "b\n}\n",
		"exponents":            "variable \"x\" {\n  default = [" + r("1e-5, ", 200) + "1]\n}\n",
		"escaped quotes":       "variable \"x\" {\n  default = \"" + r("\\\"(((", 500) + "\"\n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got := hostile(t, src); len(got) != 0 {
				t.Fatalf("refused: %.300q", got)
			}
		})
	}
}

// manyVariables declares n variables, each an expression of 40 operators:
// the operators of one expression count, not those of the file.
func manyVariables(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("variable \"v" + strings.Repeat("x", i+1) + "\" {\n  default = 1" + strings.Repeat(" + 1", 40) + "\n}\n")
	}
	return b.String()
}

// A stack file larger than MaxFileSize is refused by its size: a 100 MB
// string is not parsed (79 s before the bound) nor echoed, and a file is
// not read whole to find out (a device that never ends, here, whose first
// MiB says it is not text).
func TestAnOversizedStackFileIsRefusedBySize(t *testing.T) {
	big := "a = \"" + strings.Repeat("x", 100<<20) + "\"\n"
	got := hostile(t, big)
	if len(got) != 1 || !strings.Contains(got[0], "Stack file too large") || !strings.Contains(got[0], "104857607 bytes") || len(got[0]) > 300 {
		t.Fatalf("a 100 MB string: %.300q", got)
	}
	path := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(path, []byte(big[:conf.MaxFileSize+10]), 0o644); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{path: "Stack file too large", "/dev/zero": "Not a text file"} {
		_, diags := conf.Load(conf.Options{LookupEnv: noEnv}, p)
		if got := render(diags); len(got) != 1 || !strings.Contains(got[0], want) || !strings.HasPrefix(got[0], p+":1:1:") {
			t.Errorf("Load(%s): %.300q, want %q", p, got, want)
		}
	}
	if _, diags := conf.LoadSources(conf.Options{LookupEnv: noEnv}, conf.Source{Name: "edge.hcl", Bytes: []byte("#" + strings.Repeat("x", conf.MaxFileSize-2) + "\n")}); diags.HasErrors() {
		t.Errorf("a file of exactly MaxFileSize bytes: %q", render(diags))
	}
}

// The literal pieces of templates, whose joining HCL does in quadratic
// time, are bounded: a heredoc of more lines than MaxTemplatePieces, or a
// string of more $${ escapes, is refused; one within the bound loads.
func TestTemplatePiecesAreBounded(t *testing.T) {
	doc := func(lines int) string {
		return "variable \"x\" {\n  default = <<EOT\n" + strings.Repeat("x\n", lines) + "EOT\n}\n"
	}
	if got := hostile(t, doc(conf.MaxTemplatePieces-10)); len(got) != 0 {
		t.Fatalf("a heredoc within the bound: %q", got)
	}
	for name, src := range map[string]string{
		"heredoc lines":  doc(100000),
		"$${ escapes":    "a = \"" + strings.Repeat("$${x}", 20000) + "\"\n",
		"%%{ escapes":    "a = <<E\n" + strings.Repeat("%%{x}", 20000) + "\nE\n",
		"many heredocs":  strings.Repeat("a = <<E\n"+strings.Repeat("x\n", 1000)+"E\n", 5),
		"lines of a doc": "a = <<-E\n" + strings.Repeat("  x\n", conf.MaxTemplatePieces+1) + "  E\n",
	} {
		t.Run(name, func(t *testing.T) {
			got := hostile(t, src)
			if len(got) != 1 || !strings.Contains(got[0], "too many template lines") && !strings.Contains(got[0], "too long a template") {
				t.Fatalf("%.300q", got)
			}
		})
	}
	// Fewer lines, but long: 1,000 lines of 250 bytes would copy 125 MB.
	long := "a = <<E\n" + strings.Repeat(strings.Repeat("y", 249)+"\n", 1000) + "E\n"
	if got := hostile(t, long); len(got) != 1 || !strings.Contains(got[0], "too long a template") {
		t.Fatalf("a heredoc of long lines: %.300q", got)
	}
	if got := hostile(t, doc(400)); len(got) != 0 {
		t.Fatalf("a heredoc of 400 lines: %q", got)
	}
}

// A diagnostic quotes at most a line's worth of a value, whatever the
// file holds: a name or a value of 100 KB is cut with an ellipsis.
func TestADiagnosticQuotesALinesWorthOfAValue(t *testing.T) {
	long := strings.Repeat("y", 100<<10)
	for name, src := range map[string]string{
		"an unknown component":  "btl \"" + long + "\" \"a\" {}\n",
		"an unknown attribute":  "job {\n  " + long + " = 1\n}\n",
		"an invalid value":      "job {\n  protocol = \"" + long + "\"\n}\n",
		"an unknown block type": long + " {}\n",
	} {
		t.Run(name, func(t *testing.T) {
			got := hostile(t, src)
			if len(got) == 0 {
				t.Fatal("no diagnostic")
			}
			for _, line := range got {
				if len(line) > 1200 || !strings.Contains(line, "yyyy…") {
					t.Errorf("%d bytes, want a clipped value: %.200q", len(line), line)
				}
			}
			err := conf.Err(diagsOf(src))
			if err == nil || len(err.Error()) > 1300*len(got) {
				t.Errorf("the error is %d bytes", len(err.Error()))
			}
		})
	}
}

func diagsOf(src string) hcl.Diagnostics {
	_, diags := conf.LoadSources(conf.Options{LookupEnv: noEnv}, conf.Source{Name: "h.hcl", Bytes: []byte(src)})
	return diags
}

// A file of 100,000 mistakes is answered with MaxDiagnosticsShown lines
// and a count of the rest.
func TestManyDiagnosticsAreCounted(t *testing.T) {
	diags := diagsOf(strings.Repeat("job {}\n", 100000))
	var b strings.Builder
	if err := conf.WriteDiagnostics(&b, diags); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != conf.MaxDiagnosticsShown+1 || lines[len(lines)-1] != "... and 99949 more" {
		t.Fatalf("%d lines, the last %q", len(lines), lines[len(lines)-1])
	}
	if msg := conf.Err(diags).Error(); !strings.HasSuffix(msg, "... and 99949 more errors") {
		t.Fatalf("the error ends %q", msg[max(0, len(msg)-80):])
	}
}
