package conf

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gobtl/gobtl/internal/suggest"
	"github.com/hashicorp/hcl/v2"
)

// FormatDiagnostic renders one diagnostic as `file:line:col: summary; detail`,
// the form compilers use so that editors can jump to it. Warnings carry a
// "warning: " prefix before the summary; a diagnostic that belongs to no file
// (a --var for an undeclared variable) is rendered without a position.
func FormatDiagnostic(d *hcl.Diagnostic) string {
	var b strings.Builder
	if d.Subject != nil {
		fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	}
	if d.Severity == hcl.DiagWarning {
		b.WriteString("warning: ")
	}
	b.WriteString(clipQuoted(d.Summary))
	if d.Detail != "" {
		b.WriteString("; ")
		b.WriteString(clipQuoted(d.Detail))
	}
	return b.String()
}

// MaxDiagnosticsShown is how many diagnostics WriteDiagnostics and
// Error's message list before they say how many more there are: a file
// of 100,000 repeated lines is not answered with 100,000 lines.
const MaxDiagnosticsShown = 50

// WriteDiagnostics writes the diagnostics, one per line, the first
// MaxDiagnosticsShown of them and then how many more there are.
func WriteDiagnostics(w io.Writer, diags hcl.Diagnostics) error {
	for i, d := range diags {
		line := FormatDiagnostic(d)
		if i == MaxDiagnosticsShown {
			line = fmt.Sprintf("... and %d more", len(diags)-i)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		if i == MaxDiagnosticsShown {
			break
		}
	}
	return nil
}

// Error is the error form of a configuration's diagnostics: its message is
// every error diagnostic, one per line.
type Error struct {
	Diagnostics hcl.Diagnostics
	// cause is what a start reported (StartError), for errors.Is.
	cause error
}

// StartError is the configuration error of a block that a job's start
// could not build from the stack — a transport that does not open on this
// host, a policy that refuses the job's transports or rails — at the
// block's file:line:col: what `gobtl config check` reports, and what
// every rank's start returns, instead of a failure at the first message
// (a lost peer). It wraps err.
func StartError(block hcl.Range, summary string, err error) *Error {
	return &Error{Diagnostics: hcl.Diagnostics{errorAt(block, summary, err.Error())}, cause: err}
}

// Unwrap is the error a start reported, if any.
func (e *Error) Unwrap() error { return e.cause }

func (e *Error) Error() string {
	var lines []string
	n := 0
	for _, d := range e.Diagnostics {
		if d.Severity != hcl.DiagError {
			continue
		}
		if n++; n <= MaxDiagnosticsShown {
			lines = append(lines, FormatDiagnostic(d))
		}
	}
	if n > MaxDiagnosticsShown {
		lines = append(lines, fmt.Sprintf("... and %d more errors", n-MaxDiagnosticsShown))
	}
	return strings.Join(lines, "\n")
}

// Err returns an *Error holding diags when they contain an error, and nil
// when they hold only warnings (or nothing).
func Err(diags hcl.Diagnostics) error {
	if !diags.HasErrors() {
		return nil
	}
	return &Error{Diagnostics: diags}
}

// sortDiagnostics orders diags by file (in load order), line and column, so
// the output is stable: hcl reports unsupported arguments by walking a map.
// Diagnostics without a position come first.
func sortDiagnostics(diags hcl.Diagnostics, files []string) {
	rank := func(name string) int {
		if i := slices.Index(files, name); i >= 0 {
			return i
		}
		return len(files)
	}
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		switch {
		case a.Subject == nil && b.Subject == nil:
			return 0
		case a.Subject == nil:
			return -1
		case b.Subject == nil:
			return 1
		}
		return cmp.Or(
			cmp.Compare(rank(a.Subject.Filename), rank(b.Subject.Filename)),
			cmp.Compare(a.Subject.Filename, b.Subject.Filename),
			cmp.Compare(a.Subject.Start.Byte, b.Subject.Start.Byte),
		)
	})
}

// Suggest returns the option closest to given, or "" when none is close
// enough to be what the user meant (suggest.Nearest): the did-you-mean of
// every diagnostic.
func Suggest(given string, options []string) string { return suggest.Nearest(given, options) }

// didYouMean formats a suggestion for the end of a detail: ` Did you mean
// "x"?`, or "" when there is none.
func didYouMean(given string, options []string) string {
	if s := Suggest(given, options); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}

// quoteList renders names as `"a", "b" and "c"`.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	switch len(q) {
	case 0:
		return "none"
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

func errorAt(rng hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}
}

func warningAt(rng hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: detail, Subject: rng.Ptr()}
}
