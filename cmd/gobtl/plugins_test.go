package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/internal/mptest"
)

// buildTestPolicy builds gobtl's test policy plugin into a fresh directory.
func buildTestPolicy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "testpolicy")
	if err := mptest.Build("", bin, "../../plugins/internal/testplugins/testpolicy"); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestPluginsListAndVerifyAndConfigCheck(t *testing.T) {
	bin := buildTestPolicy(t)

	out, errOut, code := run(t, newPluginsCmd(), "list", "--dir", filepath.Dir(bin))
	if code != 0 || !strings.Contains(out, "testpolicy") || !strings.Contains(out, "flow_control,recvbuf,sched") || !strings.Contains(out, bin) {
		t.Fatalf("plugins list: exit %d\n%s\n%s", code, out, errOut)
	}

	out, errOut, code = run(t, newPluginsCmd(), "verify", "--events", "500", "--param", "mode=good", bin)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "ok") {
		t.Fatalf("plugins verify of a good policy: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = run(t, newPluginsCmd(), "verify", "--events", "500", "--param", "mode=bad", bin)
	if code != 1 || !strings.Contains(out, "FAIL  flow_control/stream/ib") {
		t.Fatalf("plugins verify of a bad policy: exit %d\n%s", code, out)
	}
	if _, _, code = run(t, newPluginsCmd(), "verify", "--param", "nosuch=1", bin); code != 1 {
		t.Fatalf("plugins verify with an unknown --param: exit %d", code)
	}

	// config check reads the plugin's own schema: a misspelt parameter
	// is an error at its line, with the plugin's names to choose from.
	f := writeFile(t, "stack.hcl", "btl \"self\" \"self\" {}\npolicy \"sched\" {\n  plugin = \"testpolicy\"\n  path   = \""+bin+"\"\n  mdoe   = \"good\"\n}\n")
	_, errOut, code = run(t, newConfigCmd(), "check", f)
	if code != 1 || !strings.Contains(errOut, f+":5:3: Unsupported argument") || !strings.Contains(errOut, `Did you mean "mode"?`) {
		t.Fatalf("config check of a misspelt plugin parameter: exit %d\n%s", code, errOut)
	}
	f = writeFile(t, "missing.hcl", "btl \"self\" \"self\" {}\npolicy \"sched\" {\n  plugin = \"nosuch\"\n}\n")
	_, errOut, code = run(t, newConfigCmd(), "check", f)
	if code != 1 || !strings.Contains(errOut, f+":3:12") || !strings.Contains(errOut, "searched") {
		t.Fatalf("config check of a missing plugin: exit %d\n%s", code, errOut)
	}
}
