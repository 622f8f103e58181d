package conf_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// mustLoad loads srcs and fails the test on any diagnostic, warnings
// included.
func mustLoad(t *testing.T, opts conf.Options, srcs ...conf.Source) *conf.Config {
	t.Helper()
	if opts.LookupEnv == nil {
		opts.LookupEnv = noEnv
	}
	c, diags := conf.LoadSources(opts, srcs...)
	if len(diags) > 0 {
		t.Fatalf("unexpected diagnostics:\n%s", strings.Join(render(diags), "\n"))
	}
	return c
}

func TestAnEmptyConfigurationIsTheDefaultStack(t *testing.T) {
	c := mustLoad(t, conf.Options{}, file("empty.hcl", ""))
	want := conf.Job{
		Protocol:       conf.ProtocolRDMARead,
		EagerLimit:     conf.Unset,
		RndvEagerLimit: conf.Unset,
		Exclusive:      true,
		MaxReads:       conf.Unset,
		StallTimeout:   0,
		Progress:       conf.Progress{Spin: 2000, Yield: 50, Sleep: 10 * time.Microsecond, MaxSleep: 500 * time.Microsecond},
		Placement:      conf.Placement{MapBy: "core", BindTo: "auto"},
		Log:            conf.Log{Level: "warn", Components: map[string]string{}},
	}
	if !reflect.DeepEqual(c.Job, want) {
		t.Fatalf("job = %+v\nwant  %+v", c.Job, want)
	}
	if !reflect.DeepEqual(conf.DefaultJob(), want) {
		t.Fatalf("DefaultJob() = %+v", conf.DefaultJob())
	}
	if c.JobRange != nil || len(c.Policies) != 0 {
		t.Fatalf("empty file produced blocks: %+v", c)
	}
	if !c.DefaultBTLs || !reflect.DeepEqual(btlNames(c), btlNames(mustLoad(t, conf.Options{}, conf.DefaultStack()))) {
		t.Fatalf("empty file: btls %v (default %v), want the default stack's", btlNames(c), c.DefaultBTLs)
	}
	if n := len(c.JobParams.Blocks("progress")); n != 1 {
		t.Fatalf("progress block not filled in: %d blocks", n)
	}
}

func btlNames(c *conf.Config) []string {
	var names []string
	for _, b := range c.BTLs {
		names = append(names, b.Kind+"/"+b.Name)
	}
	return names
}

// A file without btl blocks changes only what it names, as an MCA
// parameter does: the transports stay the default stack's, whatever sets
// them (examples/default.hcl, embedded). A file with one btl block has
// only the transports it names.
func TestAFileWithoutBTLBlocksKeepsTheDefaultTransports(t *testing.T) {
	def := btlNames(mustLoad(t, conf.Options{}, conf.DefaultStack()))
	if !slices.Contains(def, "sm/local") || !slices.Contains(def, "self/self") {
		t.Fatalf("the default stack has %v, want self and sm among them", def)
	}
	c := mustLoad(t, conf.Options{}, file("proto.hcl", "job {\n  protocol = \"rdma_write\"\n}\npolicy \"sched\" {\n  builtin = \"round_robin\"\n}\n"))
	if got := btlNames(c); !c.DefaultBTLs || !reflect.DeepEqual(got, def) || c.Job.Protocol != conf.ProtocolRDMAWrite || len(c.Policies) != 1 {
		t.Fatalf("btls %v (default %v), protocol %s, %d policies; want %v, rdma_write, 1", got, c.DefaultBTLs, c.Job.Protocol, len(c.Policies), def)
	}
	var out strings.Builder
	if err := c.WriteHCL(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `btl "sm" "local"`) || !strings.Contains(out.String(), "the default stack's transports") {
		t.Fatalf("config show does not print the transports in force:\n%s", out.String())
	}
	c = mustLoad(t, conf.Options{}, file("one.hcl", `btl "sm" "mine" {}`))
	if got := btlNames(c); c.DefaultBTLs || !reflect.DeepEqual(got, []string{"sm/mine"}) {
		t.Fatalf("a file with a btl block: %v (default %v), want only its own", got, c.DefaultBTLs)
	}
}

func TestCheckReachWarnsAboutAStackThatReachesNoOtherProcess(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		warn      bool
	}{
		{"self alone", `btl "self" "self" {}`, true},
		{"the in-process fabric", "btl \"self\" \"self\" {}\nbtl \"inproc\" \"r\" {}", true},
		{"shared memory", `btl "sm" "local" {}`, false},
		{"a network BTL", `btl "ib" "rail0" {}`, false},
		{"no btl block: the default", `job {}`, false},
		{"a BTL that does not say", `btl "testnet" "n" {}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoad(t, conf.Options{}, file("r.hcl", tc.src))
			diags := c.CheckReach()
			if got := len(diags) > 0; got != tc.warn {
				t.Fatalf("warned %v, want %v: %v", got, tc.warn, render(diags))
			}
			if tc.warn && (diags[0].Severity != hcl.DiagWarning || !strings.HasPrefix(render(diags)[0], "r.hcl:1:1: warning: No transport reaches another process") ||
				!strings.Contains(diags[0].Detail, `"sm"`)) {
				t.Fatalf("warning: %v", render(diags))
			}
		})
	}
}

func TestABinaryFileIsOneError(t *testing.T) {
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	_, diags := conf.LoadSources(conf.Options{}, file("gobtl", string(bin)))
	if len(diags) != 1 || !strings.HasPrefix(render(diags)[0], "gobtl:1:1: Not a text file") {
		t.Fatalf("a binary file: %d diagnostics %v, want one \"Not a text file\"", len(diags), render(diags)[:min(3, len(diags))])
	}
}

func TestTheJobBlockDecodesEveryField(t *testing.T) {
	c := mustLoad(t, conf.Options{}, file("job.hcl", `
job {
  protocol         = "rdma_read_async"
  eager_limit      = "12KiB"
  rndv_eager_limit = 1000
  exclusive        = false
  max_reads        = 4
  stall_timeout    = "30s"
  progress {
    spin = 0
    max_sleep = "1ms"
  }
  placement {
    map_by          = "socket"
    bind_to         = "numa"
    report_bindings = true
  }
  log {
    level      = "info"
    components = { pml = "debug", "btl.sm" = "off" }
  }
}
`))
	want := conf.Job{
		Protocol:       conf.ProtocolRDMAReadAsync,
		EagerLimit:     12 << 10,
		RndvEagerLimit: 1000,
		Exclusive:      false,
		MaxReads:       4,
		StallTimeout:   30 * time.Second,
		Progress:       conf.Progress{Spin: 0, Yield: 50, Sleep: 10 * time.Microsecond, MaxSleep: time.Millisecond, SpinSet: true},
		Placement:      conf.Placement{MapBy: "socket", BindTo: "numa", ReportBindings: true},
		Log:            conf.Log{Level: "info", Components: map[string]string{"pml": "debug", "btl.sm": "off"}},
	}
	if !reflect.DeepEqual(c.Job, want) {
		t.Fatalf("job = %+v\nwant  %+v", c.Job, want)
	}
	if c.JobRange == nil || c.JobRange.Start.Line != 2 {
		t.Fatalf("JobRange = %v", c.JobRange)
	}
}

func TestEveryParameterTypeDecodesWithUnits(t *testing.T) {
	c := mustLoad(t, conf.Options{}, file("net.hcl", `
btl "testnet" "rail0" {
  device      = "mlx5_0"
  mode        = "event"
  ports       = 2
  weight      = 0.25
  verbose     = true
  eager_limit = "12KB"
  max_send    = 65536
  bandwidth   = "12.5GB/s"
  latency     = "1.5us"
  hosts       = ["a", "b"]
  labels      = { rack = "r1", "zone.name" = "z" }
  queue {
    size  = "256B"
    count = 64
  }
  queue {
    size = "64KiB"
  }
  tuning {
    retry {
      count = 3
    }
  }
}
btl "testnet" "rail1" {
  ports = "3"          # a string that is a number is a number
  eager_limit = null   # null keeps the default
}
`))
	if len(c.BTLs) != 2 || c.BTLs[0].Name != "rail0" || c.BTLs[1].Name != "rail1" || c.BTLs[0].Kind != "testnet" {
		t.Fatalf("BTLs: %+v", c.BTLs)
	}
	p := c.BTLs[0].Params
	checks := []struct {
		name      string
		got, want any
	}{
		{"device", p.String("device"), "mlx5_0"},
		{"mode", p.String("mode"), "event"},
		{"ports", p.Int("ports"), 2},
		{"weight", p.Float("weight"), 0.25},
		{"verbose", p.Bool("verbose"), true},
		{"eager_limit (SI)", p.Size("eager_limit"), int64(12000)},
		{"max_send (plain bytes)", p.Size("max_send"), int64(65536)},
		{"bandwidth", p.Rate("bandwidth"), 12.5e9},
		{"latency", p.Duration("latency"), 1500 * time.Nanosecond},
		{"hosts", p.Strings("hosts"), []string{"a", "b"}},
		{"labels", p.Map("labels"), map[string]string{"rack": "r1", "zone.name": "z"}},
		{"queues", len(p.Blocks("queue")), 2},
		{"queue 0 size", p.Blocks("queue")[0].Size("size"), int64(256)},
		{"queue 0 count", p.Blocks("queue")[0].Int("count"), 64},
		{"queue 1 size (IEC)", p.Blocks("queue")[1].Size("size"), int64(64 << 10)},
		{"queue 1 count (default)", p.Blocks("queue")[1].Int("count"), 8},
		{"tuning spin (default)", p.Blocks("tuning")[0].Int("spin"), 10},
		{"tuning retry count", p.Blocks("tuning")[0].Blocks("retry")[0].Int("count"), 3},
		{"rail1 ports", c.BTLs[1].Params.Int("ports"), 3},
		{"rail1 eager_limit (null: default)", c.BTLs[1].Params.Size("eager_limit"), int64(4096)},
		{"rail1 eager_limit not set", c.BTLs[1].Params.IsSet("eager_limit"), false},
		{"rail1 max_send has no value", c.BTLs[1].Params.Has("max_send"), false},
		{"rail1 no queues", len(c.BTLs[1].Params.Blocks("queue")), 0},
		{"rail1 bandwidth (default)", c.BTLs[1].Params.Rate("bandwidth"), 1e9},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if c.BTLs[0].DeclRange.Start.Line != 2 || c.BTLs[0].Component.Name != "testnet" {
		t.Errorf("rail0 DeclRange %v, component %v", c.BTLs[0].DeclRange, c.BTLs[0].Component)
	}
}

// varsStack declares a variable of each kind and uses them: in an
// attribute, a template, an index expression and a block's list.
const varsStack = `
variable "kib" {
  default = 8
}
variable "proto" {
  description = "rendezvous protocol"
  default     = "rdma_read"
}
variable "hosts" {
  default = ["h0"]
}
variable "spin" {
  default = 100
}
job {
  protocol    = var.proto
  eager_limit = "${var.kib}KiB"
  progress {
    spin = var["spin"]
  }
}
btl "testnet" "n0" {
  hosts = var.hosts
}
`

// varOverride is a load of varsStack with --var values and an
// environment, and what the variables must resolve to and say they came
// from.
type varOverride struct {
	name      string
	vars      map[string]string
	env       map[string]string
	wantEager int64
	wantProto conf.Protocol
	wantHosts []string
	wantSpin  int
	wantFrom  map[string]string
}

// varOverrides go from the defaults through the environment to --var.
var varOverrides = []varOverride{
	{
		name:      "defaults apply when nothing overrides them",
		wantEager: 8 << 10, wantProto: conf.ProtocolRDMARead, wantHosts: []string{"h0"}, wantSpin: 100,
		wantFrom: map[string]string{"kib": "default", "proto": "default", "hosts": "default", "spin": "default"},
	},
	{
		name:      "the environment overrides a default",
		env:       map[string]string{"GOBTL_VAR_kib": "16", "GOBTL_VAR_spin": "0"},
		wantEager: 16 << 10, wantProto: conf.ProtocolRDMARead, wantHosts: []string{"h0"}, wantSpin: 0,
		wantFrom: map[string]string{"kib": "GOBTL_VAR_kib", "spin": "GOBTL_VAR_spin"},
	},
	{
		name:      "--var overrides the environment",
		vars:      map[string]string{"kib": "32", "proto": "pipeline"},
		env:       map[string]string{"GOBTL_VAR_kib": "16"},
		wantEager: 32 << 10, wantProto: conf.ProtocolPipeline, wantHosts: []string{"h0"}, wantSpin: 100,
		wantFrom: map[string]string{"kib": "--var", "proto": "--var"},
	},
	{
		name:      "a list variable's override is parsed as HCL",
		vars:      map[string]string{"hosts": `["a", "b", "c"]`},
		wantEager: 8 << 10, wantProto: conf.ProtocolRDMARead, wantHosts: []string{"a", "b", "c"}, wantSpin: 100,
		wantFrom: map[string]string{"hosts": "--var"},
	},
}

func TestVariablesResolveWithOverrides(t *testing.T) {
	src := file("vars.hcl", varsStack)
	for _, tt := range varOverrides {
		t.Run(tt.name, func(t *testing.T) {
			opts := conf.Options{Vars: tt.vars, LookupEnv: func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }}
			c := mustLoad(t, opts, src)
			if c.Job.EagerLimit != tt.wantEager || c.Job.Protocol != tt.wantProto || c.Job.Progress.Spin != tt.wantSpin {
				t.Errorf("job: eager %d proto %s spin %d", c.Job.EagerLimit, c.Job.Protocol, c.Job.Progress.Spin)
			}
			if got := c.BTLs[0].Params.Strings("hosts"); !slices.Equal(got, tt.wantHosts) {
				t.Errorf("hosts = %v, want %v", got, tt.wantHosts)
			}
			for _, v := range c.Variables {
				want := tt.wantFrom[v.Name]
				if want == "" {
					want = "default"
				}
				if v.Source != want {
					t.Errorf("var.%s came from %q, want %q", v.Name, v.Source, want)
				}
			}
			if c.Variables[1].Description != "rendezvous protocol" {
				t.Errorf("description = %q", c.Variables[1].Description)
			}
		})
	}
}

func TestABadListOverrideIsADiagnostic(t *testing.T) {
	_, diags := conf.LoadSources(conf.Options{Vars: map[string]string{"hosts": `["a",`}, LookupEnv: noEnv},
		file("v.hcl", "variable \"hosts\" { default = [] }\n"))
	got := render(diags)
	if len(got) == 0 || !strings.HasPrefix(got[0], "--var hosts:1:") {
		t.Fatalf("diagnostics = %q", got)
	}
}

func TestABuiltinPolicyIsDecodedAgainstItsSchema(t *testing.T) {
	c := mustLoad(t, conf.Options{}, file("p.hcl", `
policy "flow_control" {
  builtin = "testfc"
  buffers = 32
  bucket { size = "4KiB" }
  bucket {}
}
policy "recvbuf" {
  builtin    = "testrb"
  on_failure = "abort"
}
`))
	if len(c.Policies) != 2 || c.Policies[0].Kind != core.KindFlowControl || c.Policies[1].Kind != core.KindRecvBuf {
		t.Fatalf("policies: %+v", c.Policies)
	}
	fc := c.Policy(core.KindFlowControl)
	if fc.Plugin || fc.Name != "testfc" || fc.Component == nil || !fc.Checked || fc.OnFailure != conf.OnFailureFallback {
		t.Fatalf("flow control: %+v", fc)
	}
	if fc.Params.Int("buffers") != 32 || fc.Params.Int("threshold") != 4 || len(fc.Params.Blocks("bucket")) != 2 ||
		fc.Params.Blocks("bucket")[1].Size("size") != 8<<10 {
		t.Fatalf("flow control params: %v", fc.Params.Names())
	}
	if c.Policy(core.KindRecvBuf).OnFailure != conf.OnFailureAbort || c.Policy(core.KindSched) != nil {
		t.Fatal("recvbuf on_failure or sched policy wrong")
	}
}

const pluginPolicy = `
variable "win" {
  default = 8
}
policy "flow_control" {
  plugin     = "plugfc"
  path       = "/opt/gobtl/plugins/plugfc"
  sha256     = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
  plugin_dir = "/opt/gobtl/plugins"
  window     = var.win
}
`

func TestAPluginBodyIsKeptUncheckedWithoutAPluginHost(t *testing.T) {
	c, diags := conf.LoadSources(conf.Options{LookupEnv: noEnv}, file("p.hcl", pluginPolicy))
	want := []string{`p.hcl:5:1: warning: Policy "flow_control" body not checked; The schema of plugin "plugfc" is known only once the plugin runs; its parameters are checked then.`}
	if got := render(diags); !slices.Equal(got, want) {
		t.Fatalf("diagnostics = %q", got)
	}
	if diags.HasErrors() || conf.Err(diags) != nil {
		t.Fatal("a warning counted as an error")
	}
	p := c.Policy(core.KindFlowControl)
	if !p.Plugin || p.Name != "plugfc" || p.Checked || p.Path != "/opt/gobtl/plugins/plugfc" || p.PluginDir != "/opt/gobtl/plugins" || len(p.SHA256) != 64 {
		t.Fatalf("policy: %+v", p)
	}
	// Later, the plugin host has the schema.
	if ds := c.DecodePolicy(p, pluginFCParams); len(ds) > 0 {
		t.Fatalf("DecodePolicy: %q", render(ds))
	}
	if !p.Checked || p.Params.Int("window") != 8 {
		t.Fatalf("decoded late: checked %v window %d", p.Checked, p.Params.Int("window"))
	}
	// And a typo found late still points into the file.
	if ds := c.DecodePolicy(p, []core.Param{{Name: "windows", Type: core.ParamInt}}); !slices.Equal(render(ds),
		[]string{`p.hcl:10:3: Unsupported argument; An argument named "window" is not expected here. Did you mean "windows"?`}) {
		t.Fatalf("late typo: %q", render(ds))
	}
}

func TestAnUncheckedPluginBodyStillChecksItsVariables(t *testing.T) {
	_, diags := conf.LoadSources(conf.Options{LookupEnv: noEnv}, file("p.hcl", strings.Replace(pluginPolicy, "var.win", "var.wn", 1)))
	got := render(diags)
	want := `p.hcl:10:16: Reference to undeclared variable; No variable "wn" is declared; declare it with a variable "wn" { } block. Did you mean "win"?`
	if !slices.Contains(got, want) {
		t.Fatalf("diagnostics = %q", got)
	}
}

// fakeHost is a CheckPolicy hook in the shape of gobtl.CheckPolicy: the
// plugin "plugfc" has the schema pluginFCParams and refuses a window
// above 64, as a plugin's own check would; any other plugin is missing.
func fakeHost(asked *[]string) func(c *conf.Config, p *conf.Policy) hcl.Diagnostics {
	return func(c *conf.Config, p *conf.Policy) hcl.Diagnostics {
		if asked != nil {
			*asked = append(*asked, string(p.Kind)+"/"+p.Name+"@"+p.Path)
		}
		switch {
		case !p.Plugin:
			return nil
		case p.Name != "plugfc":
			return hcl.Diagnostics{p.StartError(os.ErrNotExist)}
		}
		if diags := c.DecodePolicy(p, pluginFCParams); diags.HasErrors() {
			return diags
		}
		if w := p.Params.Int("window"); w > 64 {
			return hcl.Diagnostics{p.ValueError(fmt.Sprintf("window: %d is more than the 64 the plugin allows", w))}
		}
		if p.Params.Int("window") == 3 {
			return hcl.Diagnostics{p.ValueError("a window of 3 is unlucky")}
		}
		return nil
	}
}

func TestCheckPolicyBuildsEveryPolicyAndReportsAtItsPosition(t *testing.T) {
	var asked []string
	opts := conf.Options{LookupEnv: noEnv, CheckPolicy: fakeHost(&asked)}
	c := mustLoad(t, opts, file("p.hcl", pluginPolicy))
	if p := c.Policy(core.KindFlowControl); !p.Checked || p.Params.Int("window") != 8 {
		t.Fatalf("policy: %+v", p)
	}
	if !slices.Equal(asked, []string{"flow_control/plugfc@/opt/gobtl/plugins/plugfc"}) {
		t.Fatalf("hook called with %q", asked)
	}

	for _, tc := range []struct{ name, src, want string }{
		{"a plugin not found, at its name", "policy \"sched\" {\n  plugin = \"nosuch\"\n}\n",
			`q.hcl:2:12: Cannot start sched plugin "nosuch"; File does not exist.`},
		{"a value of the wrong type, by the plugin's schema", "policy \"flow_control\" {\n  plugin = \"plugfc\"\n  window = \"wide\"\n}\n",
			`q.hcl:3:12: Invalid value for "window"; want an integer, got "wide".`},
		{"a value the plugin's own check refuses, at its attribute", "policy \"flow_control\" {\n  plugin = \"plugfc\"\n  window = 100\n}\n",
			`q.hcl:3:12: Invalid value for "window"; 100 is more than the 64 the plugin allows.`},
		{"a refusal that names no parameter, at the block", "policy \"flow_control\" {\n  plugin = \"plugfc\"\n  window = 3\n}\n",
			`q.hcl:1:1: Invalid flow control policy "plugfc" configuration; A window of 3 is unlucky.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := conf.LoadSources(opts, file("q.hcl", tc.src))
			if got := render(diags); !slices.Equal(got, []string{tc.want}) {
				t.Fatalf("diagnostics = %q\nwant %q", got, tc.want)
			}
		})
	}
	asked = nil
	mustLoad(t, opts, file("b.hcl", "btl \"self\" \"self\" {}\npolicy \"flow_control\" {\n  builtin = \"testfc\"\n  buffers = 2\n}\n"))
	if !slices.Equal(asked, []string{"flow_control/testfc@"}) {
		t.Fatalf("a built-in is not checked by the same hook: %q", asked)
	}
}

func TestShowOutputLoadsBackToTheSameConfiguration(t *testing.T) {
	src := file("full.hcl", `
variable "rate" { default = "12.5GB/s" }
job {
  eager_limit = "12KiB"
  log { components = { pml = "debug" } }
}
btl "testnet" "rail0" {
  bandwidth = var.rate
  latency   = "1500ns"
  hosts     = ["a"]
  labels    = { rack = "r1" }
  queue { size = 1000 }
  tuning {}
}
btl "self" "self" {}
policy "flow_control" {
  builtin = "testfc"
  buffers = 3
}
`)
	c := mustLoad(t, conf.Options{}, src)
	var out bytes.Buffer
	if err := c.WriteHCL(&out); err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile(` +=`).ReplaceAllString(out.String(), " =")
	for _, want := range []string{`eager_limit = "12KiB"`, `bandwidth = "12.5GB/s"`, `latency = "1.5us"`, `# max_send: not set`, `max_sleep = "500us"`, "btl \"self\" \"self\" {"} {
		if !strings.Contains(shown, want) {
			t.Errorf("show output lacks %q:\n%s", want, out.String())
		}
	}
	again := mustLoad(t, conf.Options{}, file("full.hcl", out.String()))
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(again)
	// Only the variables differ: the shown configuration has them resolved.
	var ja, jb map[string]any
	_ = json.Unmarshal(a, &ja)
	_ = json.Unmarshal(b, &jb)
	delete(ja, "variables")
	delete(jb, "variables")
	if !reflect.DeepEqual(ja, jb) {
		t.Fatalf("round trip differs:\n%s\n%s\nshown:\n%s", a, b, out.String())
	}
}

func TestJSONCarriesTypedValues(t *testing.T) {
	c := mustLoad(t, conf.Options{}, file("j.hcl", `
variable "n" { default = 2 }
btl "testnet" "n0" {
  ports = var.n
  eager_limit = "1KiB"
  queue { size = 1 }
}
`))
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Job struct {
			Protocol string `json:"protocol"`
			Progress struct {
				Sleep string `json:"sleep"`
			} `json:"progress"`
			EagerLimit any `json:"eager_limit"`
		} `json:"job"`
		BTL []struct {
			Kind, Name string
			Params     map[string]any
		} `json:"btl"`
		Variables []struct {
			Name   string
			Value  any
			Source string
		} `json:"variables"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Job.Protocol != "rdma_read" || got.Job.Progress.Sleep != "10us" || got.Job.EagerLimit != nil {
		t.Errorf("job: %+v", got.Job)
	}
	p := got.BTL[0].Params
	if p["ports"] != 2.0 || p["eager_limit"] != 1024.0 || p["bandwidth"] != 1e9 || p["max_send"] != nil {
		t.Errorf("btl params: %v", p)
	}
	if q, ok := p["queue"].([]any); !ok || len(q) != 1 {
		t.Errorf("queue: %v", p["queue"])
	}
	if tn, ok := p["tuning"]; !ok || tn != nil {
		t.Errorf("absent non-repeated block: %v", tn)
	}
	if len(got.Variables) != 1 || got.Variables[0].Value != 2.0 || got.Variables[0].Source != "default" {
		t.Errorf("variables: %+v", got.Variables)
	}
}

func TestLoadReadsFilesAndDirectories(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.hcl", "job { protocol = \"pipeline\" }\n")
	write("b.hcl", "btl \"self\" \"self\" {}\n")
	write("notes.txt", "not configuration")

	c, diags := conf.Load(conf.Options{LookupEnv: noEnv}, dir)
	if len(diags) > 0 || len(c.Files) != 2 || c.Job.Protocol != conf.ProtocolPipeline || len(c.BTLs) != 1 {
		t.Fatalf("directory: files %v, diags %q", c.Files, render(diags))
	}
	// Naming a file twice (the directory and the file in it) loads it once.
	if _, diags := conf.Load(conf.Options{LookupEnv: noEnv}, dir, a); len(diags) > 0 {
		t.Fatalf("file named twice: %q", render(diags))
	}
	_, diags = conf.Load(conf.Options{LookupEnv: noEnv}, filepath.Join(dir, "missing.hcl"))
	if got := render(diags); len(got) != 1 || !strings.HasPrefix(got[0], "Cannot read configuration file; Open ") || !strings.Contains(got[0], "missing.hcl") {
		t.Fatalf("missing file: %q", got)
	}
	_, diags = conf.Load(conf.Options{LookupEnv: noEnv}, t.TempDir())
	if got := render(diags); len(got) != 1 || !strings.HasPrefix(got[0], "No configuration files; Directory ") {
		t.Fatalf("empty directory: %q", got)
	}
}

func TestErrRendersOnlyErrors(t *testing.T) {
	diags := hcl.Diagnostics{
		{Severity: hcl.DiagWarning, Summary: "w", Subject: &hcl.Range{Filename: "x.hcl", Start: hcl.Pos{Line: 1, Column: 2}}},
		{Severity: hcl.DiagError, Summary: "e", Detail: "d", Subject: &hcl.Range{Filename: "x.hcl", Start: hcl.Pos{Line: 3, Column: 4}}},
	}
	if conf.Err(diags[:1]) != nil {
		t.Fatal("Err of a warning is not nil")
	}
	if got := conf.Err(diags).Error(); got != "x.hcl:3:4: e; d" {
		t.Fatalf("Err = %q", got)
	}
	var b bytes.Buffer
	_ = conf.WriteDiagnostics(&b, diags)
	if b.String() != "x.hcl:1:2: warning: w\nx.hcl:3:4: e; d\n" {
		t.Fatalf("WriteDiagnostics = %q", b.String())
	}
}

func TestVariableValuesAreCty(t *testing.T) {
	c := mustLoad(t, conf.Options{Vars: map[string]string{"b": "true"}, LookupEnv: noEnv},
		file("v.hcl", "variable \"b\" { default = false }\n"))
	if !c.Variables[0].Value.RawEquals(cty.True) {
		t.Fatalf("bool override: %#v", c.Variables[0].Value)
	}
}
