package conformance

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/internal/mptest"
)

// TestEveryBuiltinPluginConforms builds every plugins/<name> wrapper of a
// built-in policy and runs the suite on it, as `gobtl plugins verify`
// would.
func TestEveryBuiltinPluginConforms(t *testing.T) {
	mains, err := mptest.Mains("..", "*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) == 0 {
		t.Skip("no built-in policy plugin wrappers")
	}
	dir := t.TempDir()
	if err := mptest.Build("..", dir+string(filepath.Separator), mains...); err != nil {
		t.Fatal(err)
	}
	for _, m := range mains {
		name := filepath.Base(m)
		t.Run(name, func(t *testing.T) {
			// A deadline a loaded machine cannot stretch past: these
			// plugins answer, and the suite's own tests cover a miss.
			r, err := Verify(context.Background(), filepath.Join(dir, name), Options{Events: 2000, Deadline: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			r.Write(&b)
			if !r.Passed() {
				t.Fatalf("\n%s", b.String())
			}
			t.Logf("\n%s", b.String())
		})
	}
}
