package mptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Build runs `go build -o out pkgs...` in directory wd ("" for the
// current one; a directory with its own go.mod builds as its own module),
// with the go command that runs the tests. out ending in a separator is a
// directory receiving one executable per main package, named after its
// directory. Tests build what they start with it: policy plugins, which
// run as processes of their own, and the gobtl command.
func Build(wd, out string, pkgs ...string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, append([]string{"build", "-o", out}, pkgs...)...)
	cmd.Dir = wd
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (in %q): %v\n%s", strings.Join(pkgs, " "), wd, err, b)
	}
	return nil
}

// BuildTemp builds the main packages pkgs (as Build does, in wd) into a
// fresh directory, one executable each named after its package, for a
// TestMain's setup: cleanup removes the directory.
func BuildTemp(wd string, pkgs ...string) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", "gobtl-test-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err := Build(wd, dir+string(filepath.Separator), pkgs...); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

// Mains lists, as ./relative package paths, the directories matching
// pattern (a glob of main.go files, like "plugins/*/main.go") relative to
// root.
func Mains(root, pattern string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil {
		return nil, err
	}
	var pkgs []string
	for _, f := range files {
		rel, err := filepath.Rel(root, filepath.Dir(f))
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(rel))
	}
	return pkgs, nil
}

// built is what this test binary built once for all its tests, removed
// when Main's tests end.
var built struct {
	once  sync.Once
	dir   string
	gobtl string
	err   error
}

// Gobtl returns the gobtl command, built once per test binary, for tests
// that run the command itself (`gobtl run ... -- gobtl bench`). The
// package's TestMain must be Main, which removes it at the end.
func Gobtl(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "gobtl-mptest-")
		if built.err != nil {
			return
		}
		built.gobtl = filepath.Join(built.dir, "gobtl")
		built.err = Build("", built.gobtl, "github.com/gobtl/gobtl/cmd/gobtl")
	})
	if built.err != nil {
		t.Fatalf("mptest: %v", built.err)
	}
	return built.gobtl
}
