package arch

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxLines is the longest a function may be, from its doc-less "func" line
// to its closing brace: a function longer than a screen hides its parts,
// which want names of their own.
const maxLines = 80

// longFuncsFile lists the functions over maxLines today, one a line:
// "path func lines". It can only shrink: a listed function may not grow,
// one at or under maxLines (or gone) fails the test until its line is
// deleted, and an unlisted one over maxLines fails.
const longFuncsFile = "testdata/long_funcs.txt"

// funcLengths returns "path func" -> lines for every function and method
// of the module's non-generated Go files, tests included. A method is
// named Type.Method.
func funcLengths(t *testing.T, root string) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules":
				return filepath.SkipDir
			}
			// A nested module (the example plugins) is its own code base.
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if ast.IsGenerated(f) {
			return nil
		}
		relp, _ := filepath.Rel(root, p)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Type.Pos()).Line + 1
			out[filepath.ToSlash(relp)+" "+funcName(fd)] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

func readLongFuncs(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(longFuncsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			t.Fatalf("%s:%d: want \"path func lines\", got %q", longFuncsFile, ln, line)
		}
		n, err := strconv.Atoi(fs[2])
		if err != nil {
			t.Fatalf("%s:%d: %v", longFuncsFile, ln, err)
		}
		out[fs[0]+" "+fs[1]] = n
	}
	return out
}

// checkLengths compares the lengths found with the allow-list and returns
// what breaks the rule.
func checkLengths(found, allowed map[string]int) []string {
	var bad []string
	for k, n := range found {
		if n <= maxLines {
			continue
		}
		was, ok := allowed[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s is %d lines (at most %d): split it into parts with names of their own", k, n, maxLines))
		case n > was:
			bad = append(bad, fmt.Sprintf("%s grew from %d to %d lines (at most %d; listed functions may only shrink)", k, was, n, maxLines))
		}
	}
	for k := range allowed {
		if n, ok := found[k]; !ok || n <= maxLines {
			bad = append(bad, fmt.Sprintf("%s is gone or at most %d lines: delete its line from %s", k, maxLines, longFuncsFile))
		}
	}
	sort.Strings(bad)
	return bad
}

func TestNoFunctionIsLongerThanAScreen(t *testing.T) {
	for _, b := range checkLengths(funcLengths(t, "../.."), readLongFuncs(t)) {
		t.Error(b)
	}
}

// TestTheLengthRuleCatchesGrowthAndNewcomers breaks the rule on purpose.
func TestTheLengthRuleCatchesGrowthAndNewcomers(t *testing.T) {
	allowed := map[string]int{"a.go f": 100, "b.go g": 90}
	for _, c := range []struct {
		found map[string]int
		bad   int
	}{
		{map[string]int{"a.go f": 100, "b.go g": 85, "c.go h": 80}, 0}, // shrank, still listed: fine
		{map[string]int{"a.go f": 101, "b.go g": 90}, 1},               // grew
		{map[string]int{"a.go f": 100, "b.go g": 90, "c.go h": 81}, 1}, // a newcomer
		{map[string]int{"a.go f": 80, "b.go g": 90}, 1},                // mended: its line must go
		{map[string]int{"b.go g": 90}, 1},                              // gone: its line must go
	} {
		if got := checkLengths(c.found, allowed); len(got) != c.bad {
			t.Errorf("%v: %d complaints %q, want %d", c.found, len(got), got, c.bad)
		}
	}
}
