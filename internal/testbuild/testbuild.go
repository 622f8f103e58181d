// Package testbuild builds the executables that tests start — policy
// plugins above all, which run as processes of their own — with the go
// command that runs the tests.
package testbuild

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Go runs `go build -o out pkgs...` in directory wd ("" for the current
// one; a directory with its own go.mod builds as its own module). out
// ending in a separator is a directory receiving one executable per main
// package, named after its directory.
func Go(wd, out string, pkgs ...string) error {
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
