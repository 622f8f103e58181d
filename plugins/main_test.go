package plugins

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/internal/mptest"
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
	if err := mptest.Build("", dir+string(filepath.Separator), "./internal/testplugins/testpolicy", "./internal/testplugins/notplugin", "./internal/testplugins/wrongproto"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
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
