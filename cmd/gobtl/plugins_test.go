package main

import (
	"os"
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

	t.Setenv("GOBTL_PLUGIN_PATH", "/nonexistent/gobtl-plugins")
	out, errOut, code := run(t, newPluginsCmd(), "list", "--dir", filepath.Dir(bin))
	if code != 0 || !strings.Contains(out, "testpolicy") || !strings.Contains(out, "flow_control,recvbuf,sched") || !strings.Contains(out, bin) {
		t.Fatalf("plugins list: exit %d\n%s\n%s", code, out, errOut)
	}
	// Every directory searched, in order, with what it holds.
	self, _ := os.Executable()
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"--dir " + filepath.Dir(bin) + " (1 plugin) $GOBTL_PLUGIN_PATH /nonexistent/gobtl-plugins (does not exist)",
		"next to the executable " + filepath.Join(filepath.Dir(self), "plugins"),
		"install prefix " + filepath.Join(filepath.Dir(filepath.Dir(self)), "lib", "gobtl", "plugins"),
		"working directory bin/plugins",
	} {
		if !strings.Contains(flat, want) {
			t.Fatalf("plugins list does not show %q:\n%s", want, out)
		}
	}

	out, errOut, code = run(t, newPluginsCmd(), "verify", "--events", "500", "--deadline", "30s", "--param", "mode=good", bin)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "ok") {
		t.Fatalf("plugins verify of a good policy: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = run(t, newPluginsCmd(), "verify", "--events", "500", "--deadline", "30s", "--param", "mode=bad", bin)
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

	// A misspelt plugin name gets a did-you-mean from what the searched
	// directories hold.
	f = writeFile(t, "typo.hcl", "btl \"sm\" \"sm\" {}\npolicy \"sched\" {\n  plugin     = \"testpolicyy\"\n  plugin_dir = \""+filepath.Dir(bin)+"\"\n}\n")
	_, errOut, code = run(t, newConfigCmd(), "check", f)
	if code != 1 || !strings.Contains(errOut, f+`:3:16: Cannot start sched plugin "testpolicyy"`) || !strings.Contains(errOut, `Did you mean "testpolicy"?`) {
		t.Fatalf("config check of a misspelt plugin: exit %d\n%s", code, errOut)
	}

	// The plugin's own check of a value (step must be positive, a Check
	// function the schema's ranges cannot carry) runs at check time, as
	// at a job's start, and is reported at the value.
	f = writeFile(t, "step.hcl", "btl \"sm\" \"sm\" {}\npolicy \"sched\" {\n  plugin = \"testpolicy\"\n  path   = \""+bin+"\"\n  step   = 0\n}\n")
	out, errOut, code = run(t, newConfigCmd(), "check", f)
	if code != 1 || errOut != f+":5:12: Invalid value for \"step\"; Step must be positive.\n" || out != f+": 1 error\n" {
		t.Fatalf("config check of a value the plugin refuses: exit %d\n%s\n%s", code, out, errOut)
	}
	f = writeFile(t, "good.hcl", "btl \"sm\" \"sm\" {}\npolicy \"sched\" {\n  plugin = \"testpolicy\"\n  path   = \""+bin+"\"\n  step   = 2\n}\n")
	if out, errOut, code = run(t, newConfigCmd(), "check", f); code != 0 || out != f+": ok\n" {
		t.Fatalf("config check of a good plugin body: exit %d\n%s\n%s", code, out, errOut)
	}
	// A built-in's constructor runs at check time too: the same path.
	f = writeFile(t, "builtin.hcl", "btl \"ib\" \"r\" {}\npolicy \"recvbuf\" {\n  builtin        = \"perpeer\"\n  receive_queues = \"S,2048,256,128,32\"\n}\n")
	if _, errOut, code = run(t, newConfigCmd(), "check", f); code != 1 || !strings.Contains(errOut, f+`:2:1: Invalid recvbuf policy "perpeer" configuration; Recvbuf perpeer: queue 1 is shared`) {
		t.Fatalf("config check of a built-in's inconsistent values: exit %d\n%s", code, errOut)
	}
}

// config check never runs a plugin whose sha256 pin does not match: the
// executable would leave a mark. It is named by its file name in
// plugin_dir, as `plugin = "ls"` would be.
func TestConfigCheckRunsNoExecutableWhosePinDoesNotMatch(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	if err := os.WriteFile(filepath.Join(dir, "ls"), []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := writeFile(t, "pinned.hcl", "btl \"sm\" \"sm\" {}\npolicy \"sched\" {\n  plugin     = \"ls\"\n  plugin_dir = \""+dir+"\"\n  sha256     = \""+strings.Repeat("0", 64)+"\"\n}\n")
	for _, cmd := range []string{"check", "show"} {
		_, errOut, code := run(t, newConfigCmd(), cmd, f)
		if code != 1 || !strings.Contains(errOut, f+`:3:16: Cannot start sched plugin "ls"`) || !strings.Contains(errOut, "the stack file pins 0000") {
			t.Fatalf("config %s of a pin that does not match: exit %d\n%s", cmd, code, errOut)
		}
		if _, err := os.Stat(mark); !os.IsNotExist(err) {
			t.Fatalf("config %s ran the executable although its pin did not match (%v)", cmd, err)
		}
	}
}
