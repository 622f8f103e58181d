package conformance

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryBuiltinPluginConforms builds every plugins/<name> wrapper of a
// built-in policy and runs the suite on it, as `gobtl plugins verify`
// would.
func TestEveryBuiltinPluginConforms(t *testing.T) {
	mains, err := filepath.Glob("../*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) == 0 {
		t.Skip("no built-in policy plugin wrappers")
	}
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, m := range mains {
		args = append(args, "./"+filepath.ToSlash(filepath.Dir(m)))
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		t.Run(name, func(t *testing.T) {
			r, err := Verify(context.Background(), filepath.Join(dir, name), Options{Events: 2000})
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
