package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The docs a reader meets first, checked for what rots: links to files
// that moved and identifiers that were renamed. Every relative link must
// name a file or directory of the repository, and every `pkg.Name` or
// `pkg.Type.Method` in backquotes, where pkg is one of the module's
// package names, must name a declaration of that package.
var checkedDocs = []string{"README.md", "ARCHITECTURE.md", "CHANGELOG.md", "docs/*.md"}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdCode  = regexp.MustCompile("`([^`\n]+)`")
	goIdent = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\[[^\]]*\])?(?:\(\))?$`)
)

// decls maps a package name to the names declared at its top level and
// its methods as Type.Method, over every package of the module with that
// name (names are not unique: two "job"s would merge, which only makes
// the check more lenient).
func decls(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || (p != root && strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil
		}
		name := f.Name.Name
		if filepath.Dir(p) == root {
			name = "gobtl"
		}
		m := out[name]
		if m == nil {
			m = map[string]bool{}
			out[name] = m
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) > 0 {
					if n := funcName(d); strings.Contains(n, ".") {
						m[n] = true
					}
					continue
				}
				m[d.Name.Name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						m[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, f := range st.Fields.List {
								for _, n := range f.Names {
									m[s.Name.Name+"."+n.Name] = true
								}
							}
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, f := range it.Methods.List {
								for _, n := range f.Names {
									m[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							m[n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func docFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, g := range checkedDocs {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	return files
}

// docProblems returns what is wrong with the Markdown text of file (at
// path rel from the repository root).
func docProblems(root, rel, text string, pkgs map[string]map[string]bool) []string {
	var bad []string
	dir := filepath.Dir(filepath.Join(root, rel))
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(dir, target)); err != nil {
				bad = append(bad, rel+":"+strconv.Itoa(i+1)+": link to "+m[1]+": no such file or directory")
			}
		}
		for _, m := range mdCode.FindAllStringSubmatch(line, -1) {
			id := goIdent.FindStringSubmatch(m[1])
			if id == nil {
				continue
			}
			names, ok := pkgs[id[1]]
			if !ok || !ast.IsExported(id[2]) {
				continue // not one of ours (a standard library or foreign name, a file name), or a metric (`pml.stripes`)
			}
			want := id[2]
			if id[3] != "" {
				want = id[2] + "." + id[3]
			}
			if !names[want] {
				bad = append(bad, rel+":"+strconv.Itoa(i+1)+": `"+m[1]+"`: package "+id[1]+" declares no "+want)
			}
		}
	}
	return bad
}

func TestDocsNameWhatExists(t *testing.T) {
	const root = "../.."
	pkgs := decls(t, root)
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, p := range docProblems(root, rel, string(b), pkgs) {
			t.Error(p)
		}
	}
}

// TestTheDocCheckCatchesStaleNames breaks a doc on purpose.
func TestTheDocCheckCatchesStaleNames(t *testing.T) {
	pkgs := map[string]map[string]bool{"core": {"Module": true, "Module.Send": true}}
	text := "See `core.Module`, `core.Module.Send`, `core.Gone`, `core.Module.Gone`, `fmt.Println`, [x](no/such/file) and [y](imports_test.go).\n```\n`core.InFence`\n```\n"
	got := docProblems(".", "x.md", text, pkgs)
	if len(got) != 3 {
		t.Fatalf("%d problems %q, want 3 (core.Gone, core.Module.Gone, the missing link)", len(got), got)
	}
}

// docLimits are the most lines a doc may have (issue 27): a reader
// takes in the README and the architecture in one sitting, and detail
// belongs in the package docs (go doc) or docs/*.md.
var docLimits = map[string]int{"README.md": 250, "ARCHITECTURE.md": 250}

// lineCount is the number of lines of text, a last line without a
// newline included.
func lineCount(text string) int {
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}

func TestTheReadmeAndTheArchitectureStayShort(t *testing.T) {
	for f, limit := range docLimits {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		if n := lineCount(string(b)); n > limit {
			t.Errorf("%s has %d lines, at most %d: move detail into the package docs or docs/*.md", f, n, limit)
		}
	}
}

// TestTheLineCountCountsEveryLine breaks the limit on purpose.
func TestTheLineCountCountsEveryLine(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{{"", 0}, {"a\n", 1}, {"a\nb", 2}, {strings.Repeat("x\n", 251), 251}} {
		if got := lineCount(c.text); got != c.want {
			t.Errorf("lineCount(%q…) = %d, want %d", c.text[:min(len(c.text), 4)], got, c.want)
		}
	}
}
