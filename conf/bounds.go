package conf

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// Bounds on a stack file, checked before HCL parses it. Every rank of a
// job parses the stack, so a hostile file must cost little and fail
// clearly rather than take a rank's memory or minutes of its start:
//
//   - HCL's parser and evaluator recurse once per level of nesting — a
//     bracket, brace, parenthesis, template interpolation or if/for
//     directive, and each operator of an expression (`!!!!x`,
//     `a ? b : c ? d : ...`, and `1 + 1 + ...`, whose tree is as deep as it
//     is long). A 200 KB file nested 100,000 deep took a goroutine stack
//     over 1 GB and crashed `config check`. MaxNesting bounds them all
//     together, by a scan of the bytes that follows the HCL scanner's
//     modes (code, quoted template, heredoc, comment) and costs one pass.
//   - HCL joins the literal pieces of one template (a heredoc's lines,
//     each `$${` or `%%{` escape) one at a time, copying what it joined so
//     far each time: quadratic time, 20 MB of heredoc took 115 s, and
//     100,000 lines of it 25 s; within MaxFileSize, 4,090 lines of 250
//     bytes still took 4.2 s. MaxTemplatePieces bounds the pieces and
//     MaxTemplateCopy the bytes those joins copy (each piece, the
//     template's bytes before it), for a file's templates in all.
//   - The rest of the parse is linear, about a second a megabyte on a
//     loaded machine: MaxFileSize keeps a start below that. Stack files
//     are a few KiB.
const (
	// MaxFileSize is the largest stack file loaded, in bytes.
	MaxFileSize = 1 << 20
	// MaxNesting is how deep a stack file's blocks, expressions and
	// templates may nest.
	MaxNesting = 64
	// MaxTemplatePieces is how many heredoc lines and template escapes
	// ($${, %%{) a stack file may hold in all.
	MaxTemplatePieces = 4096
	// MaxTemplateCopy is how many bytes HCL may copy joining them: a
	// 400-line heredoc of 80-byte lines copies 6.4 MB.
	MaxTemplateCopy = 32 << 20
)

// readSource reads a stack file, at most MaxFileSize bytes of it: a
// larger file (or a device that never ends) is refused before it is read
// whole.
func readSource(path string) ([]byte, *hcl.Diagnostic) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read configuration file", Detail: sentence(err.Error())}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read configuration file", Detail: sentence(err.Error())}
	}
	if len(b) > MaxFileSize {
		if bytes.IndexByte(b, 0) >= 0 {
			return nil, notText(Source{Name: path, Bytes: b}) // a binary, by mistake
		}
		size := "more"
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = fmt.Sprintf("%d bytes", st.Size())
		}
		return nil, tooLarge(path, size)
	}
	return b, nil
}

func tooLarge(name, size string) *hcl.Diagnostic {
	start := hcl.Pos{Line: 1, Column: 1}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Stack file too large",
		Detail:  fmt.Sprintf("%s holds %s; a stack file may hold at most %d bytes (1 MiB).", name, size, MaxFileSize),
		Subject: &hcl.Range{Filename: name, Start: start, End: start}}
}

// checkBounds refuses a source beyond the bounds above, before HCL
// parses it; nil when it is within them.
func checkBounds(s Source) *hcl.Diagnostic {
	if len(s.Bytes) > MaxFileSize {
		return tooLarge(s.Name, fmt.Sprintf("%d bytes", len(s.Bytes)))
	}
	sc := boundScan{b: s.Bytes, stack: []scanFrame{{kind: frameTop}}}
	if d := sc.run(); d != nil {
		d.Subject.Filename = s.Name
		return d
	}
	return nil
}

// Frame kinds of boundScan.
const (
	frameTop    = 'T' // the file's body
	frameBrace  = '{'
	frameSquare = '['
	frameParen  = '('
	frameInterp = '$' // ${ ... } or %{ ... }: code inside a template
	frameQuoted = '"' // a quoted template
	frameDoc    = '<' // a heredoc template
)

// scanFrame is one open level of nesting.
type scanFrame struct {
	kind byte
	// ops counts the operators since the expression in this code frame
	// began: each is a level of the parser's (or evaluator's) recursion.
	ops int
	// dirs counts the if and for directives open in this template.
	dirs int
	// marker ends a heredoc.
	marker []byte
	// start is where a template's text starts.
	start int
}

// boundScan walks a stack file in the HCL scanner's modes and measures
// its nesting: open frames, plus the operators and directives open in
// them. It never decides the file's meaning — the parser does — and errs
// toward counting more.
type boundScan struct {
	b      []byte
	i      int
	line   int // 0-based
	lineAt int // byte offset of the line's start
	stack  []scanFrame
	depth  int // len(stack)-1 + every frame's ops and dirs
	pieces int
	copied int // the bytes HCL's joins of template pieces copy
}

func (s *boundScan) top() *scanFrame { return &s.stack[len(s.stack)-1] }

func (s *boundScan) run() *hcl.Diagnostic {
	for s.i < len(s.b) {
		var d *hcl.Diagnostic
		switch s.top().kind {
		case frameQuoted, frameDoc:
			d = s.template()
		default:
			d = s.code()
		}
		if d != nil {
			return d
		}
	}
	return nil
}

// at is the diagnostic position of byte offset i.
func (s *boundScan) at(i int) *hcl.Range {
	p := hcl.Pos{Line: s.line + 1, Column: utf8.RuneCount(s.b[s.lineAt:i]) + 1, Byte: i}
	return &hcl.Range{Start: p, End: p}
}

func (s *boundScan) newline(next int) {
	s.line++
	s.lineAt = next
}

func (s *boundScan) push(f scanFrame) *hcl.Diagnostic {
	s.stack = append(s.stack, f)
	s.depth++
	return s.check()
}

func (s *boundScan) pop() {
	f := s.top()
	s.depth -= 1 + f.ops + f.dirs
	s.stack = s.stack[:len(s.stack)-1]
}

// op counts an operator of the current expression.
func (s *boundScan) op() *hcl.Diagnostic {
	s.top().ops++
	s.depth++
	return s.check()
}

// separate ends the current expression of the top frame.
func (s *boundScan) separate() {
	f := s.top()
	s.depth -= f.ops
	f.ops = 0
}

func (s *boundScan) check() *hcl.Diagnostic {
	if s.depth <= MaxNesting {
		return nil
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Stack file nested too deeply",
		Detail: fmt.Sprintf("Blocks, brackets, templates and the operators of one expression nest here %d deep; "+
			"a stack file may nest at most %d deep.", s.depth, MaxNesting),
		Subject: s.at(s.i)}
}

// code scans one token of code (a file's body, a bracket, an
// interpolation).
func (s *boundScan) code() *hcl.Diagnostic {
	b, i := s.b, s.i
	c := b[i]
	next := byte(0)
	if i+1 < len(b) {
		next = b[i+1]
	}
	switch {
	case c == '\n':
		s.newline(i + 1)
		if k := s.top().kind; k == frameTop || k == frameBrace {
			s.separate() // a newline ends an attribute or an object's item
		}
		s.i++
	case c == '#' || c == '/' && next == '/':
		s.i = lineEnd(b, i)
	case c == '/' && next == '*':
		s.blockComment()
	case c == '"':
		s.i++
		return s.push(scanFrame{kind: frameQuoted, start: s.i})
	case c == '<' && next == '<':
		if s.heredoc() {
			return s.check()
		}
		s.i += 2
		return s.op()
	case c == '{' || c == '[' || c == '(':
		s.i++
		return s.push(scanFrame{kind: c})
	case c == '}' || c == '~' && next == '}':
		s.closeBrace()
	case c == ']' || c == ')':
		if k := s.top().kind; k == frameSquare && c == ']' || k == frameParen && c == ')' {
			s.pop()
		}
		s.i++
	case c == ',' || c == '=' && next != '=' && next != '>':
		s.separate()
		s.i++
	case strings.IndexByte("!-+*/%<>?&|=", c) >= 0:
		if next == '=' || c == '&' && next == '&' || c == '|' && next == '|' || c == '=' && next == '>' {
			s.i++
		}
		s.i++
		return s.op()
	case isIdentStart(c):
		s.i = identEnd(b, i)
	case c >= '0' && c <= '9':
		s.i = numberEnd(b, i)
	default:
		s.i++
	}
	return nil
}

// closeBrace ends what a `}` ends in the HCL scanner, which counts only
// braces: the innermost brace or interpolation, with any bracket or
// parenthesis left open inside it (the parser has failed on those).
func (s *boundScan) closeBrace() {
	if s.b[s.i] == '~' {
		s.i++
	}
	s.i++
	for len(s.stack) > 1 {
		k := s.top().kind
		if k == frameQuoted || k == frameDoc {
			return
		}
		s.pop()
		if k == frameBrace || k == frameInterp {
			return
		}
	}
}

func (s *boundScan) blockComment() {
	end := bytes.Index(s.b[s.i+2:], []byte("*/"))
	stop := len(s.b)
	if end >= 0 {
		stop = s.i + 2 + end + 2
	}
	for j := s.i; j < stop; j++ {
		if s.b[j] == '\n' {
			s.newline(j + 1)
		}
	}
	s.i = stop
}

// heredoc opens a heredoc if `<<` at s.i introduces one (`<<ID` or
// `<<-ID` and the end of the line), as the HCL scanner does.
func (s *boundScan) heredoc() bool {
	b, j := s.b, s.i+2
	if j < len(b) && b[j] == '-' {
		j++
	}
	if j >= len(b) || !isIdentStart(b[j]) {
		return false
	}
	end := identEnd(b, j)
	marker := b[j:end]
	if end < len(b) && b[end] == '\r' {
		end++
	}
	if end >= len(b) || b[end] != '\n' {
		return false
	}
	s.stack = append(s.stack, scanFrame{kind: frameDoc, marker: marker, start: end + 1})
	s.depth++
	s.i = end + 1
	s.newline(s.i)
	return true
}

// template scans a piece of a quoted template or a heredoc.
func (s *boundScan) template() *hcl.Diagnostic {
	b, i, f := s.b, s.i, s.top()
	if f.kind == frameDoc && i == s.lineAt {
		// A line that is the marker, spaces aside, ends the heredoc.
		end := lineEnd(b, i)
		if bytes.Equal(bytes.TrimSpace(b[i:end]), f.marker) {
			s.pop()
			s.i = end
			return nil
		}
	}
	c := b[i]
	next, third := byte(0), byte(0)
	if i+1 < len(b) {
		next = b[i+1]
	}
	if i+2 < len(b) {
		third = b[i+2]
	}
	switch {
	case c == '\n':
		s.newline(i + 1)
		s.i++
		if f.kind == frameDoc {
			return s.piece()
		}
	case c == '\\' && f.kind == frameQuoted:
		s.i += 2
		if next == '\n' {
			s.newline(i + 2)
		}
	case c == '"' && f.kind == frameQuoted:
		s.pop()
		s.i++
	case (c == '$' || c == '%') && next == c && third == '{':
		s.i += 3
		return s.piece()
	case (c == '$' || c == '%') && next == '{':
		s.i += 2
		if c == '%' {
			if d := s.directive(); d != nil {
				return d
			}
		}
		return s.push(scanFrame{kind: frameInterp})
	default:
		s.i++
	}
	return nil
}

// piece counts a literal piece of a template, which HCL joins to the
// template's text before it.
func (s *boundScan) piece() *hcl.Diagnostic {
	s.pieces++
	s.copied += s.i - s.top().start
	switch {
	case s.pieces > MaxTemplatePieces:
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Stack file has too many template lines",
			Detail: fmt.Sprintf("Its heredoc lines and template escapes ($${, %%%%{) number more than %d; "+
				"a stack file may hold at most %d.", MaxTemplatePieces, MaxTemplatePieces),
			Subject: s.at(s.i)}
	case s.copied > MaxTemplateCopy:
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Stack file has too long a template",
			Detail: fmt.Sprintf("HCL joins a template's pieces (a heredoc's lines, its $${ and %%%%{ escapes) one at a time, "+
				"copying the text before each; this file's would copy more than %d MiB, in time that grows as lines times length. "+
				"Shorten the heredoc, or split it.", MaxTemplateCopy>>20),
			Subject: s.at(s.i)}
	}
	return nil
}

// directive counts the if and for directives a template opens and the
// endif and endfor that close them; s.i is after `%{`.
func (s *boundScan) directive() *hcl.Diagnostic {
	b, j := s.b, s.i
	if j < len(b) && b[j] == '~' {
		j++
	}
	for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
		j++
	}
	word := string(b[j:identEnd(b, j)])
	f := s.top()
	switch word {
	case "if", "for":
		f.dirs++
		s.depth++
		return s.check()
	case "endif", "endfor":
		if f.dirs > 0 {
			f.dirs--
			s.depth--
		}
	}
	return nil
}

func lineEnd(b []byte, i int) int {
	if k := bytes.IndexByte(b[i:], '\n'); k >= 0 {
		return i + k
	}
	return len(b)
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// identEnd is the end of the identifier at i: HCL's identifiers hold
// dashes (`a-b` is one name, not a subtraction).
func identEnd(b []byte, i int) int {
	for i < len(b) && (isIdentStart(b[i]) || b[i] == '-' || b[i] >= '0' && b[i] <= '9') {
		i++
	}
	return i
}

// numberEnd is the end of the number at i, an exponent's sign included.
func numberEnd(b []byte, i int) int {
	for i < len(b) {
		c := b[i]
		switch {
		case c >= '0' && c <= '9' || c == '.':
			i++
		case (c == 'e' || c == 'E') && i+1 < len(b) && (b[i+1] == '+' || b[i+1] == '-'):
			i += 2
		case c == 'e' || c == 'E':
			i++
		default:
			return i
		}
	}
	return i
}

// maxQuote is how much of a value a diagnostic quotes: a line's worth
// (a path of a plugin fits).
const maxQuote = 100

// clipQuoted shortens every double-quoted value in s to maxQuote
// characters and an ellipsis, and s itself to a few lines' worth: a
// diagnostic names the value, it does not echo a hostile file back.
func clipQuoted(s string) string {
	if len(s) <= maxQuote {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		out.WriteByte(c)
		i++
		if c != '"' {
			continue
		}
		// A quoted value runs to the next unescaped quote.
		j, n := i, 0
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' && j+1 < len(s) {
				j++
			}
			_, w := utf8.DecodeRuneInString(s[j:])
			j += w
			n++
		}
		if n <= maxQuote {
			out.WriteString(s[i:j])
		} else {
			k := i
			for range maxQuote {
				if s[k] == '\\' && k+1 < len(s) {
					k++
				}
				_, w := utf8.DecodeRuneInString(s[k:])
				k += w
			}
			out.WriteString(s[i:k])
			out.WriteString("…")
		}
		if j < len(s) {
			out.WriteByte('"')
			j++
		}
		i = j
	}
	r := out.String()
	if max := 16 * maxQuote; len(r) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		r = r[:cut] + "…"
	}
	return r
}
