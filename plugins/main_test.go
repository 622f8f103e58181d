package plugins

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// binDir holds the test plugins, built once by TestMain with `go build`.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gobtl-plugins-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := goBuild(dir, "./internal/testplugins/testpolicy", "./internal/testplugins/notplugin", "./internal/testplugins/wrongproto"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goBuild builds main packages into dir, named after their directories.
func goBuild(dir string, pkgs ...string) error {
	return goBuildIn("", dir+string(filepath.Separator), pkgs...)
}

// goBuildIn runs go build -o out pkgs in directory wd (its own module, if
// it has a go.mod).
func goBuildIn(wd, out string, pkgs ...string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, append([]string{"build", "-o", out}, pkgs...)...)
	cmd.Dir = wd
	outb, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s (in %q): %v\n%s", strings.Join(pkgs, " "), wd, err, outb)
	}
	return nil
}

func testBin(name string) string { return filepath.Join(binDir, name) }

// logBuffer collects zerolog JSON lines for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

func testLogger() (zerolog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return zerolog.New(buf).Level(zerolog.DebugLevel), buf
}
