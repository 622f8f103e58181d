package plugins_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/internal/mptest"
)

// installed lays out an installation as `make install PREFIX=...` does —
// the command in PREFIX/bin, the aimd plugin in PREFIX/lib/gobtl/plugins —
// and returns the command and a working directory that is neither.
func installed(t *testing.T) (gobtl, elsewhere string) {
	t.Helper()
	prefix := t.TempDir()
	gobtl = filepath.Join(prefix, "bin", "gobtl")
	plugins := filepath.Join(prefix, "lib", "gobtl", "plugins")
	for _, d := range []string{filepath.Dir(gobtl), plugins} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.ReadFile(mptest.Gobtl(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gobtl, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mptest.Build("../../examples/plugins/aimd", filepath.Join(plugins, "aimd"), "."); err != nil {
		t.Fatal(err)
	}
	return gobtl, t.TempDir()
}

// command runs the installed gobtl in dir with GOBTL_PLUGIN_PATH unset.
func command(t *testing.T, dir, gobtl string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(gobtl, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOBTL_PLUGIN_PATH=") && !strings.HasPrefix(kv, "GOBTL_CONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GOBTL_LOG=info")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// The aimd example's stack runs from any working directory once gobtl and
// its plugins are installed: the plugin is found under the install prefix
// of the running command, and every rank says it runs it.
func TestTheAIMDStackRunsFromAnotherDirectoryWhenInstalled(t *testing.T) {
	gobtl, dir := installed(t)
	src, err := os.ReadFile("../../examples/plugins/aimd/stack.hcl")
	if err != nil {
		t.Fatal(err)
	}
	stack := filepath.Join(dir, "stack.hcl")
	if err := os.WriteFile(stack, src, 0o644); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(filepath.Dir(filepath.Dir(gobtl)), "lib", "gobtl", "plugins", "aimd")

	if out, errOut, code := command(t, dir, gobtl, "config", "check", "stack.hcl"); code != 0 || out != "stack.hcl: ok\n" {
		t.Fatalf("config check: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, _ := command(t, dir, gobtl, "plugins", "list")
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, "install prefix "+filepath.Dir(plugin)+" (1 plugin)") {
		t.Errorf("plugins list does not show the install prefix's plugin:\n%s", out)
	}
	out, errOut, code := command(t, dir, gobtl, "run", "-np", "2", "--timeout", "90s", "-c", "stack.hcl", "--",
		gobtl, "bench", "msgrate", "--sizes", "1KiB", "--iters", "4096", "--json")
	if code != 0 || !strings.Contains(out, `"bench":"msgrate"`) {
		t.Fatalf("the job: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	inForce := `"flow_control":"aimd (plugin ` + plugin + `, version 0.1.0)"`
	if strings.Count(errOut, inForce) != 2 || strings.Contains(errOut, "fallback") {
		t.Fatalf("every rank should run aimd from %s, without falling back:\n%s", plugin, errOut)
	}

	// A value the plugin refuses (its own check: decrease in (0, 1)) is
	// caught by the launcher, at the value, once; no rank starts.
	bad := strings.Replace(string(src), "  max        = 32\n", "  max        = 32\n  decrease   = 1.5\n", 1)
	if err := os.WriteFile(stack, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	line := 1 + strings.Count(bad[:strings.Index(bad, "decrease   = 1.5")], "\n")
	_, errOut, code = command(t, dir, gobtl, "run", "-np", "2", "-c", "stack.hcl", "--", gobtl, "bench", "msgrate")
	want := "stack.hcl:" + strconv.Itoa(line) + ":16: Invalid value for \"decrease\"; Decrease must be in (0, 1).\n"
	if code != 1 || strings.Count(errOut, want) != 1 || !strings.Contains(errOut, "gobtl: run: the stack has 1 error; no rank was started") ||
		strings.Contains(errOut, "gobtl: bench: gobtl:") {
		t.Fatalf("a refused value: exit %d, want once %q:\n%s", code, want, errOut)
	}
}
