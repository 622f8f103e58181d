package plugins

import (
	"bytes"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/rs/zerolog"
)

// binDir holds the test plugins, built once by TestMain with `go build`.
var binDir string

func TestMain(m *testing.M) {
	mptest.Main(m, map[string]func() int{"host": hostMain}, func() (cleanup func(), err error) {
		binDir, cleanup, err = mptest.BuildTemp("", "./internal/testplugins/testpolicy", "./internal/testplugins/notplugin", "./internal/testplugins/wrongproto", "./extoll_dynamic")
		return cleanup, err
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	msgtest.Until(t, what, d, cond)
}

func testBin(name string) string { return filepath.Join(binDir, name) }

// testDeadline is how long a test's plugin may leave a batch unanswered
// before the host counts it dead, for every test but those of the
// deadline itself: a well-behaved plugin on a loaded machine (two CPU
// hogs, another test run) can take longer than the 2 s default.
const testDeadline = 30 * time.Second

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

func testLogger() (zerolog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return zerolog.New(buf).Level(zerolog.DebugLevel), buf
}
