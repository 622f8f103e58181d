//go:build ofi && cgo

package fabric

import (
	"debug/elf"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestLibfabricIsLoadedNotLinked: a binary with this package does not
// name libfabric among the libraries it needs, so that a process that
// never opens btl "ofi" does not load it — and, through it, the
// libraries of every provider (Debian's libinfinipath sleeps ~200 ms in
// its constructor: `gobtl version` took 0.21 s linked, 0.006 s not).
func TestLibfabricIsLoadedNotLinked(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(libs, func(l string) bool { return strings.HasPrefix(l, "libfabric") }); i >= 0 {
		t.Fatalf("the test binary needs %s (all: %v): libfabric is linked", libs[i], libs)
	}
	if err := Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
}

// TestAMissingLibfabricIsAClearError: a library that cannot be loaded
// is ErrNoLibrary, naming it and saying what to install.
func TestAMissingLibfabricIsAClearError(t *testing.T) {
	err := load("libfabric-gobtl-nosuch.so.1")
	if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "libfabric-gobtl-nosuch.so.1") ||
		!strings.Contains(err.Error(), "install libfabric1") {
		t.Fatalf("load of a missing library: %v", err)
	}
}
