package plugins_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/core"
)

// TestEveryBuiltinPolicyLoadsBothWays runs a short job with each policy
// compiled into gobtl, selected with builtin = "name" and then with
// plugin = "name" — the plugins/<name> wrapper, which every built-in
// must have.
func TestEveryBuiltinPolicyLoadsBothWays(t *testing.T) {
	for _, kind := range core.PolicyKinds {
		for _, c := range core.Components(kind) {
			t.Run(fmt.Sprintf("%s/%s", kind, c.Name), func(t *testing.T) {
				if !slices.Contains(builtins, c.Name) {
					t.Fatalf("built-in %s policy %q has no plugins/%s/main.go serving it as a plugin", kind, c.Name, c.Name)
				}
				for _, sel := range []string{
					fmt.Sprintf("builtin = %q", c.Name),
					fmt.Sprintf("plugin = %q\n  plugin_dir = %q", c.Name, builtinDir),
				} {
					path := filepath.Join(t.TempDir(), "stack.hcl")
					src := fmt.Sprintf(`job {
  log { level = "error" }
}
btl "inproc" "fast" { bandwidth = "4GB/s" }
btl "inproc" "slow" { bandwidth = "1GB/s" }
policy %q {
  %s
}
`, kind, sel)
					if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
						t.Fatal(err)
					}
					err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{path}}, func(c *gobtl.Comm) error {
						return exchange(c, 8, 512<<10, nil)
					})
					if err != nil {
						t.Fatalf("with %s: %v", sel, err)
					}
				}
			})
		}
	}
}
