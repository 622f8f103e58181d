package conf_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// file is a named source for LoadSources.
func file(name, text string) conf.Source { return conf.Source{Name: name, Bytes: []byte(text)} }

func render(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		out = append(out, conf.FormatDiagnostic(d))
	}
	return out
}

// badConfig is a configuration that must not load: its files, the load's
// options, and the diagnostics it must give, each "file:line:col:
// summary; detail".
type badConfig struct {
	name  string
	opts  conf.Options
	files []conf.Source
	want  []string
}

// badConfigurations are mistakes a user makes in a stack file, each with
// the diagnostics that point at it.
var badConfigurations = []badConfig{
	{
		name:  "an unknown job attribute suggests the near one",
		files: []conf.Source{file("a.hcl", "job {\n  eagr_limit = 4096\n}\n")},
		want:  []string{`a.hcl:2:3: Unsupported argument; An argument named "eagr_limit" is not expected here. Did you mean "eager_limit"?`},
	},
	{
		name:  "an unknown top-level block type suggests the near one",
		files: []conf.Source{file("a.hcl", "btll \"self\" \"self\" {}\n")},
		want:  []string{`a.hcl:1:1: Unsupported block type; Blocks of type "btll" are not expected here. Did you mean "btl"?`},
	},
	{
		name:  "an unknown BTL parameter suggests the near one",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  bandwith = \"1GB/s\"\n}\n")},
		want:  []string{`a.hcl:2:3: Unsupported argument; An argument named "bandwith" is not expected here. Did you mean "bandwidth"?`},
	},
	{
		name:  "an unknown nested block suggests the near one",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  queu {\n    size = 1\n  }\n}\n")},
		want:  []string{`a.hcl:2:3: Unsupported block type; Blocks of type "queu" are not expected here. Did you mean "queue"?`},
	},
	{
		name:  "a string where an integer belongs is a type error",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  ports = \"two\"\n}\n")},
		want:  []string{`a.hcl:2:11: Invalid value for "ports"; want an integer, got "two".`},
	},
	{
		name:  "a fraction where an integer belongs is a type error",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  ports = 1.5\n}\n")},
		want:  []string{`a.hcl:2:11: Invalid value for "ports"; want an integer, got 1.5.`},
	},
	{
		name:  "a list where a bool belongs is a type error",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  verbose = [true]\n}\n")},
		want:  []string{`a.hcl:2:13: Invalid value for "verbose"; want true or false, got tuple.`},
	},
	{
		name:  "a bad size unit names the unit",
		files: []conf.Source{file("a.hcl", "job {\n  eager_limit = \"12XB\"\n}\n")},
		want:  []string{`a.hcl:2:17: Invalid value for "eager_limit"; size "12XB": unknown unit "XB" (want B, KB, KiB, MB, MiB, GB, GiB, TB, TiB).`},
	},
	{
		name:  "a negative size is refused",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  eager_limit = -1\n}\n")},
		want:  []string{`a.hcl:2:17: Invalid value for "eager_limit"; want a whole, non-negative number of bytes, got -1.`},
	},
	{
		name:  "a rate without per-second is refused",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  bandwidth = \"1GB\"\n}\n")},
		want:  []string{`a.hcl:2:15: Invalid value for "bandwidth"; rate "1GB": want a size per second, like "1GB/s".`},
	},
	{
		name:  "a duration without a unit is refused",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  latency = 5\n}\n")},
		want:  []string{`a.hcl:2:13: Invalid value for "latency"; a duration needs a unit: write "5ms" or "5us", say.`},
	},
	{
		name:  "a bad duration string is refused",
		files: []conf.Source{file("a.hcl", "job {\n  stall_timeout = \"5 parsecs\"\n}\n")},
		want:  []string{`a.hcl:2:19: Invalid value for "stall_timeout"; duration "5 parsecs": want a number with a unit (ns, us, ms, s, m).`},
	},
	{
		name:  "a bool where a duration belongs says what a duration looks like",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  latency = true\n}\n")},
		want:  []string{`a.hcl:2:13: Invalid value for "latency"; want a duration like "500us", got bool.`},
	},
	{
		name:  "a list where a map belongs is a type error",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  labels = [\"a\"]\n}\n")},
		want:  []string{`a.hcl:2:12: Invalid value for "labels"; want a map like { key = "value" }, got tuple.`},
	},
	{
		name:  "an extra BTL label is refused",
		files: []conf.Source{file("a.hcl", "btl \"self\" \"a\" \"b\" {}\n")},
		want:  []string{`a.hcl:1:16: Extraneous label for btl; Only 2 labels (kind, name) are expected for btl blocks.`},
	},
	{
		name:  "an empty BTL name is refused",
		files: []conf.Source{file("a.hcl", "btl \"self\" \"\" {}\n")},
		want:  []string{`a.hcl:1:12: Empty BTL name; Name the instance: btl "self" "<name>" { }.`},
	},
	{
		name:  "a bare var is not a reference",
		files: []conf.Source{file("a.hcl", "job {\n  eager_limit = var\n}\n")},
		want:  []string{`a.hcl:2:17: Invalid variable reference; A variable is referenced as var.<name>.`},
	},
	{
		name:  "a variable name that is not an identifier is refused",
		files: []conf.Source{file("a.hcl", "variable \"1st\" { default = 1 }\n")},
		want:  []string{`a.hcl:1:10: Invalid variable name; "1st" is not a valid name: use letters, digits, underscores and dashes, starting with a letter.`},
	},
	{
		name:  "an unknown variable attribute suggests the near one",
		files: []conf.Source{file("a.hcl", "variable \"n\" {\n  defualt = 1\n}\n")},
		want: []string{
			`a.hcl:1:1: No value for variable "n"; Variable "n" has no default; set it with --var n=VALUE or GOBTL_VAR_n.`,
			`a.hcl:2:3: Unsupported argument; An argument named "defualt" is not expected here. Did you mean "default"?`,
		},
	},
	{
		name:  "an empty plugin name is refused",
		files: []conf.Source{file("a.hcl", "policy \"sched\" {\n  plugin = \"\"\n}\n")},
		want:  []string{`a.hcl:2:12: Empty plugin name; Name the plugin: plugin = "<name>".`},
	},
	{
		name:  "a single string where a list belongs is a type error",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  hosts = \"a\"\n}\n")},
		want:  []string{`a.hcl:2:11: Invalid value for "hosts"; want a list of strings like ["a", "b"], got string.`},
	},
	{
		name:  "a missing second BTL label is reported at the block",
		files: []conf.Source{file("a.hcl", "btl \"self\" {}\n")},
		want:  []string{`a.hcl:1:12: Missing name for btl; All btl blocks must have 2 labels (kind, name).`},
	},
	{
		name:  "a missing policy label is reported at the block",
		files: []conf.Source{file("a.hcl", "policy {\n  builtin = \"testfc\"\n}\n")},
		want:  []string{`a.hcl:1:8: Missing kind for policy; All policy blocks must have 1 labels (kind).`},
	},
	{
		name:  "an unknown BTL component suggests the near one",
		files: []conf.Source{file("a.hcl", "btl \"slef\" \"self\" {}\n")},
		want:  []string{`a.hcl:1:5: Unknown btl component; No btl component named "slef" is compiled in. Did you mean "self"?`},
	},
	{
		name:  "an enum typo suggests the value",
		files: []conf.Source{file("a.hcl", "job {\n  protocol = \"rdma_raed\"\n}\n")},
		want:  []string{`a.hcl:2:14: Invalid value for "protocol"; "rdma_raed" is not one of "rdma_read", "rdma_write", "rdma_read_async" and "pipeline". Did you mean "rdma_read"?`},
	},
	{
		name:  "a log level typo inside the components map suggests the level",
		files: []conf.Source{file("a.hcl", "job {\n  log {\n    components = { pml = \"debgu\" }\n  }\n}\n")},
		want:  []string{`a.hcl:3:18: Invalid value for "components"; Component "pml": level "debgu" is not one of "trace", "debug", "info", "warn", "error" and "off". Did you mean "debug"?`},
	},
	{
		name:  "a check failure is reported at the value",
		files: []conf.Source{file("a.hcl", "job {\n  max_reads = 0\n}\n")},
		want:  []string{`a.hcl:2:15: Invalid value for "max_reads"; Must be at least 1, got 0.`},
	},
	{
		name:  "a value outside its schema's range is reported at the value",
		files: []conf.Source{file("a.hcl", "btl \"sm\" \"local\" {\n  fragments = 1\n}\n")},
		want:  []string{`a.hcl:2:15: Invalid value for "fragments"; Must be in [2, 65536], got 1.`},
	},
	{
		name:  "a size outside its range is shown in units",
		files: []conf.Source{file("a.hcl", "btl \"sm\" \"local\" {\n  max_send_size = \"512B\"\n}\n")},
		want:  []string{`a.hcl:2:19: Invalid value for "max_send_size"; Must be in [1KiB, 64MiB], got 512B.`},
	},
	{
		name:  "a duration below its range is reported at the value",
		files: []conf.Source{file("a.hcl", "job {\n  progress {\n    sleep = \"0s\"\n  }\n}\n")},
		want:  []string{`a.hcl:3:13: Invalid value for "sleep"; Must be at least 1ns, got 0s.`},
	},
	{
		name:  "a max_sleep below sleep is reported at the progress block",
		files: []conf.Source{file("a.hcl", "job {\n  progress {\n    sleep = \"1ms\"\n    max_sleep = \"10us\"\n  }\n}\n")},
		want:  []string{`a.hcl:2:3: Invalid progress block; max_sleep (10us) is shorter than sleep (1ms); the sleep doubles from sleep up to max_sleep.`},
	},
	{
		name:  "a missing required parameter is reported at the block",
		files: []conf.Source{file("a.hcl", "btl \"testreq\" \"r\" {\n}\n")},
		want:  []string{`a.hcl:1:1: Missing required argument; The argument "address" is required, but no definition was found.`},
	},
	{
		name:  "a missing required parameter of a repeated block is reported at that block",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  queue { count = 2 }\n}\n")},
		want:  []string{`a.hcl:2:3: Missing required argument; The argument "size" is required, but no definition was found.`},
	},
	{
		name:  "a duplicated non-repeated block points at both",
		files: []conf.Source{file("a.hcl", "btl \"testnet\" \"n0\" {\n  tuning {}\n  tuning {}\n}\n")},
		want:  []string{`a.hcl:3:3: Duplicate tuning block; Only one tuning block is allowed here; the first is at a.hcl:2:3.`},
	},
	{
		name:  "a duplicate BTL in one file points at both",
		files: []conf.Source{file("a.hcl", "btl \"self\" \"self\" {}\nbtl \"self\" \"self\" {}\n")},
		want:  []string{`a.hcl:2:1: Duplicate btl "self" "self" block; btl "self" "self" was already defined at a.hcl:1:1; give each instance its own name.`},
	},
	{
		name: "a duplicate BTL across files points at both",
		files: []conf.Source{
			file("a.hcl", "btl \"testnet\" \"rail0\" {}\n"),
			file("b.hcl", "\n\nbtl \"testnet\" \"rail0\" {}\n"),
		},
		want: []string{`b.hcl:3:1: Duplicate btl "testnet" "rail0" block; btl "testnet" "rail0" was already defined at a.hcl:1:1; give each instance its own name.`},
	},
	{
		name: "a second job block across files points at the first",
		files: []conf.Source{
			file("a.hcl", "job {}\n"),
			file("b.hcl", "job {}\n"),
		},
		want: []string{`b.hcl:1:1: Duplicate job block; A configuration has one job block; the first is at a.hcl:1:1.`},
	},
	{
		name: "a second policy of a kind across files points at the first",
		files: []conf.Source{
			file("a.hcl", "policy \"recvbuf\" {\n  builtin = \"testrb\"\n}\n"),
			file("b.hcl", "policy \"recvbuf\" {\n  builtin = \"testrb\"\n}\n"),
		},
		want: []string{`b.hcl:1:1: Duplicate policy "recvbuf" block; A job has one recvbuf policy; the first is at a.hcl:1:1.`},
	},
	{
		name: "a variable declared twice across files points at the first",
		files: []conf.Source{
			file("a.hcl", "variable \"n\" { default = 1 }\n"),
			file("b.hcl", "variable \"n\" { default = 2 }\n"),
		},
		want: []string{`b.hcl:1:1: Duplicate variable "n"; Variable "n" was already declared at a.hcl:1:1.`},
	},
	{
		name:  "an unknown policy kind suggests the near one",
		files: []conf.Source{file("a.hcl", "policy \"flowcontrol\" {\n  builtin = \"testfc\"\n}\n")},
		want:  []string{`a.hcl:1:8: Unknown policy kind; "flowcontrol" is not a policy kind; the kinds are "flow_control", "recvbuf" and "sched". Did you mean "flow_control"?`},
	},
	{
		name:  "an unknown builtin policy suggests the near one",
		files: []conf.Source{file("a.hcl", "policy \"flow_control\" {\n  builtin = \"tstfc\"\n  buffers = 4\n}\n")},
		want:  []string{`a.hcl:2:13: Unknown flow_control component; No flow_control component named "tstfc" is compiled in. Did you mean "testfc"?`},
	},
	{
		name:  "an unknown policy parameter suggests the near one",
		files: []conf.Source{file("a.hcl", "policy \"flow_control\" {\n  builtin = \"testfc\"\n  buffers = 4\n  treshold = 2\n}\n")},
		want:  []string{`a.hcl:4:3: Unsupported argument; An argument named "treshold" is not expected here. Did you mean "threshold"?`},
	},
	{
		name:  "a policy with both builtin and plugin points at both",
		files: []conf.Source{file("a.hcl", "policy \"recvbuf\" {\n  builtin = \"testrb\"\n  plugin = \"rb\"\n}\n")},
		want:  []string{`a.hcl:3:3: Both builtin and plugin; A policy is either compiled in or a plugin; builtin is already given at a.hcl:2:3.`},
	},
	{
		name:  "a plugin path on a builtin policy is refused",
		files: []conf.Source{file("a.hcl", "policy \"recvbuf\" {\n  builtin = \"testrb\"\n  path = \"/bin/rb\"\n}\n")},
		want:  []string{`a.hcl:3:3: path applies to plugins only; Policy "recvbuf" is the builtin "testrb"; remove path or use plugin = "testrb".`},
	},
	{
		name:  "an on_failure typo suggests the value",
		files: []conf.Source{file("a.hcl", "policy \"recvbuf\" {\n  plugin = \"rb\"\n  on_failure = \"fallbak\"\n}\n")},
		want:  []string{`a.hcl:3:16: Invalid value for "on_failure"; "fallbak" is not one of "fallback" and "abort". Did you mean "fallback"?`},
	},
	{
		name:  "a malformed sha256 is refused",
		files: []conf.Source{file("a.hcl", "policy \"recvbuf\" {\n  plugin = \"rb\"\n  sha256 = \"abc\"\n}\n")},
		want:  []string{`a.hcl:3:12: Invalid value for "sha256"; "abc" is not a SHA-256 digest (64 hex digits).`},
	},
	{
		name:  "a reference to an undeclared variable suggests the declared one",
		files: []conf.Source{file("a.hcl", "variable \"eager\" { default = \"8KiB\" }\njob {\n  eager_limit = var.eagr\n}\n")},
		want:  []string{`a.hcl:3:17: Reference to undeclared variable; No variable "eagr" is declared; declare it with a variable "eagr" { } block. Did you mean "eager"?`},
	},
	{
		name:  "a bare variable name suggests the var prefix",
		files: []conf.Source{file("a.hcl", "variable \"eager\" { default = \"8KiB\" }\njob {\n  eager_limit = eager\n}\n")},
		want:  []string{`a.hcl:3:17: Unknown reference; There is no symbol named "eager". Did you mean var.eager?`},
	},
	{
		name:  "an undeclared variable inside a template is found",
		files: []conf.Source{file("a.hcl", "job {\n  eager_limit = \"${var.kib}KiB\"\n}\n")},
		want:  []string{`a.hcl:2:20: Reference to undeclared variable; No variable "kib" is declared; declare it with a variable "kib" { } block.`},
	},
	{
		name:  "a variable without a value is reported at its declaration",
		files: []conf.Source{file("a.hcl", "variable \"rails\" {}\n")},
		want:  []string{`a.hcl:1:1: No value for variable "rails"; Variable "rails" has no default; set it with --var rails=VALUE or GOBTL_VAR_rails.`},
	},
	{
		name:  "a --var for an undeclared variable suggests the declared one",
		opts:  conf.Options{Vars: map[string]string{"rail": "2"}},
		files: []conf.Source{file("a.hcl", "variable \"rails\" { default = 1 }\n")},
		want:  []string{`Value for undeclared variable; --var rail was given but no variable "rail" is declared. Did you mean "rails"?`},
	},
	{
		name:  "a --var that does not fit the default's type is reported at the declaration",
		opts:  conf.Options{Vars: map[string]string{"rails": "two"}},
		files: []conf.Source{file("a.hcl", "variable \"rails\" { default = 1 }\n")},
		want:  []string{`a.hcl:1:1: Invalid value for variable "rails"; --var rails="two": want a number like the default.`},
	},
	{
		name:  "a variable's bad value is reported where it is used",
		files: []conf.Source{file("a.hcl", "variable \"mode\" { default = \"pol\" }\nbtl \"testnet\" \"n0\" {\n  mode = var.mode\n}\n")},
		want:  []string{`a.hcl:3:10: Invalid value for "mode"; "pol" is not one of "poll" and "event". Did you mean "poll"?`},
	},
	{
		name:  "a syntax error is a diagnostic",
		files: []conf.Source{file("a.hcl", "job {\n  protocol = \n}\n")},
		want:  []string{`a.hcl:2:14: Invalid expression; Expected the start of an expression, but found an invalid expression token.`},
	},
	{
		name:  "a top-level attribute is refused",
		files: []conf.Source{file("a.hcl", "protocol = \"rdma_read\"\n")},
		want:  []string{`a.hcl:1:1: Unsupported argument; An argument named "protocol" is not expected here.`},
	},
	{
		name:  "a function call is refused",
		files: []conf.Source{file("a.hcl", "job {\n  eager_limit = max(1, 2)\n}\n")},
		want:  []string{`a.hcl:2:17: Function calls not allowed; Functions may not be called here.`},
	},
	{
		name: "errors across files come out in file order",
		files: []conf.Source{
			file("z.hcl", "job {\n  protocol = \"rdma\"\n}\n"),
			file("a.hcl", "btl \"testnet\" \"n0\" {\n  ports = 0\n}\n"),
		},
		want: []string{
			`z.hcl:2:14: Invalid value for "protocol"; "rdma" is not one of "rdma_read", "rdma_write", "rdma_read_async" and "pipeline".`,
			`a.hcl:2:11: Invalid value for "ports"; Must be at least 1, got 0.`,
		},
	},
}

// registryConfigurations are the bad configurations whose diagnostics
// list the components compiled in. They are made when the test runs: the
// tests' own components register in init, after the package's variables
// are set.
func registryConfigurations() []badConfig {
	return []badConfig{
		{
			name:  "an unknown BTL component with no near name lists what exists",
			files: []conf.Source{file("a.hcl", "btl \"quantum\" \"q\" {}\n")},
			want:  []string{`a.hcl:1:5: Unknown btl component; No btl component named "quantum" is compiled in. Available: ` + availableBTLs() + `.`},
		},
		{
			name:  "a policy with neither builtin nor plugin says how to name one",
			files: []conf.Source{file("a.hcl", "policy \"recvbuf\" {}\n")},
			want:  []string{`a.hcl:1:1: Missing builtin or plugin in policy "recvbuf"; Name the implementation: builtin = "<name>" (compiled in: ` + available(core.KindRecvBuf) + `) or plugin = "<name>".`},
		},
	}
}

func TestBadConfigurationsGivePositionedDiagnostics(t *testing.T) {
	for _, tt := range append(badConfigurations, registryConfigurations()...) {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.LookupEnv = noEnv
			_, diags := conf.LoadSources(tt.opts, tt.files...)
			got := render(diags)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("diagnostics:\n  got  %s\n  want %s", strings.Join(got, "\n       "), strings.Join(tt.want, "\n       "))
			}
			if !diags.HasErrors() {
				t.Error("no error diagnostic")
			}
		})
	}
}

func noEnv(string) (string, bool) { return "", false }

var _ = core.KindBTL

// availableBTLs renders the registered BTL names the way the "unknown
// component" diagnostic lists them; it changes as components land.
func availableBTLs() string { return available(core.KindBTL) }

// available renders the registered names of a kind as diagnostics list them.
func available(kind core.Kind) string {
	var names []string
	for _, c := range core.Components(kind) {
		names = append(names, fmt.Sprintf("%q", c.Name))
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// A placement level that does not exist is an error at its value's
// position that lists those that do.
func TestABadPlacementLevelIsPositioned(t *testing.T) {
	_, diags := conf.LoadSources(conf.Options{}, file("a.hcl", "job {\n  placement {\n    bind_to = \"cores\"\n  }\n}\n"))
	want := `a.hcl:3:15: Invalid value for "bind_to"; "cores" is not one of "auto", "core", "numa", "socket" and "none". Did you mean "core"?`
	if got := render(diags); len(got) != 1 || got[0] != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
}
