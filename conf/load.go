package conf

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/gobtl/gobtl/core"
)

// Options tune a load.
type Options struct {
	// Vars are variable overrides (the CLI's --var name=value). They win
	// over GOBTL_VAR_<name> in the environment, which wins over defaults.
	Vars map[string]string
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(key string) (string, bool)
	// CheckPolicy, when set, builds the policy of a block the way a job's
	// start builds it and reports what fails, at file:line:col: a
	// built-in's constructor, a plugin started, its body decoded against
	// its own schema (DecodePolicy) and its own checks run. `gobtl config
	// check` sets it to gobtl.CheckPolicy. When nil, a plugin's body is
	// kept undecoded (Policy.Body) and a warning says it was not checked.
	CheckPolicy func(c *Config, p *Policy) hcl.Diagnostics
}

func (o Options) lookupEnv(key string) (string, bool) {
	if o.LookupEnv != nil {
		return o.LookupEnv(key)
	}
	return os.LookupEnv(key)
}

// Source is one configuration file's name and contents.
type Source struct {
	Name  string
	Bytes []byte
}

// Config is a loaded configuration: one job, the BTL instances and the
// policies, from one or more files. It is complete only when the load
// returned no error diagnostics.
type Config struct {
	// Files are the files the configuration was loaded from, in order.
	Files []string
	// Job is the typed job block, defaults filled in.
	Job Job
	// JobParams are the job block's values against JobParams, defaults and
	// the progress and log blocks filled in.
	JobParams core.Params
	// JobRange is where the job block was declared; nil when there was
	// none.
	JobRange *hcl.Range
	// BTLs are the btl blocks in the order they appear: the default
	// stack's when the files name none (DefaultBTLs).
	BTLs []*BTL
	// DefaultBTLs says the files name no btl block, so BTLs are the
	// default stack's (DefaultStack).
	DefaultBTLs bool
	// Net says which transport the default stack runs between nodes on
	// this host and why ("ofi (provider verbs, domain mlx5_0)"), once the
	// embedding API has chosen it (gobtl.WithDefaultNet); empty before.
	Net string
	// Policies are the policy blocks, at most one per kind, in the order
	// of core.PolicyKinds.
	Policies []*Policy
	// Variables are the declared variables and their effective values.
	Variables []*Variable
	// Coll is the coll block's values against CollParams, defaults filled
	// in; CollRange is where the block was declared, nil when there was
	// none.
	Coll      core.Params
	CollRange *hcl.Range

	dec *decoder
}

// BTL is one `btl "<kind>" "<name>"` block.
type BTL struct {
	// Kind is the BTL component's name: btl "sm" "local" -> "sm".
	Kind string
	// Name is the instance name: btl "sm" "local" -> "local".
	Name      string
	Component *core.Component
	// Params are the block's values against the component's schema.
	Params    core.Params
	DeclRange hcl.Range
}

// Policy returns the policy block of kind, or nil.
func (c *Config) Policy(kind core.Kind) *Policy {
	for _, p := range c.Policies {
		if p.Kind == kind {
			return p
		}
	}
	return nil
}

var topSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "job"},
	{Type: "btl", LabelNames: []string{"kind", "name"}},
	{Type: "policy", LabelNames: []string{"kind"}},
	{Type: "variable", LabelNames: []string{"name"}},
	{Type: "coll"},
}}

// Load loads one configuration from paths. A directory stands for every
// *.hcl file in it, in name order; like Terraform, all the files form one
// configuration, so a block defined in two of them is a duplicate.
func Load(opts Options, paths ...string) (*Config, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var srcs []Source
	for _, path := range expandPaths(paths, &diags) {
		b, d := readSource(path)
		if d != nil {
			diags = append(diags, d)
			continue
		}
		srcs = append(srcs, Source{Name: path, Bytes: b})
	}
	if diags.HasErrors() {
		return &Config{Job: DefaultJob(), JobParams: defaultJobParams(), Coll: core.MustParams(CollParams), dec: &decoder{ctx: evalContext(nil)}}, diags
	}
	c, ds := LoadSources(opts, srcs...)
	return c, append(diags, ds...)
}

// notText reports a source that is not text (a NUL byte, or bytes that
// are not UTF-8): a binary given as a stack file by mistake gets this one
// error instead of one per byte the HCL scanner trips on.
func notText(s Source) *hcl.Diagnostic {
	at := bytes.IndexByte(s.Bytes, 0)
	if at < 0 && utf8.Valid(s.Bytes) {
		return nil
	}
	if at < 0 {
		for i := 0; i < len(s.Bytes); {
			r, n := utf8.DecodeRune(s.Bytes[i:])
			if r == utf8.RuneError && n <= 1 {
				at = i
				break
			}
			i += n
		}
	}
	start := hcl.Pos{Line: 1, Column: 1}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Not a text file",
		Detail:  fmt.Sprintf("%s holds binary data (byte %d is not UTF-8 text); a stack file is HCL text.", s.Name, at),
		Subject: &hcl.Range{Filename: s.Name, Start: start, End: start}}
}

func expandPaths(paths []string, diags *hcl.Diagnostics) []string {
	var out []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() {
			out = append(out, p)
			continue
		}
		files, _ := filepath.Glob(filepath.Join(p, "*.hcl"))
		sort.Strings(files)
		if len(files) == 0 {
			*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError,
				Summary: "No configuration files", Detail: fmt.Sprintf("Directory %s holds no .hcl files.", p)})
		}
		out = append(out, files...)
	}
	return out
}

// LoadSources loads one configuration from sources already in memory (the
// names are used in diagnostics). It always returns a Config, filled as far
// as the sources allowed; diagnostics carry every problem found, sorted by
// file and position.
func LoadSources(opts Options, srcs ...Source) (*Config, hcl.Diagnostics) {
	c := &Config{}
	seen := map[string]bool{}
	var diags hcl.Diagnostics
	parser := hclparse.NewParser()

	var jobs, btls, policies, variables, colls []*hcl.Block
	for _, s := range srcs {
		if seen[s.Name] {
			continue // the same file named twice is loaded once
		}
		seen[s.Name] = true
		c.Files = append(c.Files, s.Name)
		if d := notText(s); d != nil {
			diags = append(diags, d)
			continue
		}
		if d := checkBounds(s); d != nil {
			diags = append(diags, d)
			continue
		}
		f, ds := parser.ParseHCL(s.Bytes, s.Name)
		diags = append(diags, ds...)
		if f == nil {
			continue
		}
		content, ds := f.Body.Content(topSchema)
		diags = append(diags, ds...)
		for _, b := range content.Blocks {
			switch b.Type {
			case "job":
				jobs = append(jobs, b)
			case "btl":
				btls = append(btls, b)
			case "policy":
				policies = append(policies, b)
			case "variable":
				variables = append(variables, b)
			case "coll":
				colls = append(colls, b)
			}
		}
	}

	vars, ds := decodeVariables(variables, opts)
	diags = append(diags, ds...)
	c.Variables = vars
	c.dec = &decoder{ctx: evalContext(vars)}
	for _, v := range vars {
		c.dec.varNames = append(c.dec.varNames, v.Name)
	}

	diags = append(diags, c.decodeJob(jobs)...)
	diags = append(diags, c.decodeBTLs(btls)...)
	if len(btls) == 0 {
		c.addDefaultBTLs()
	}
	diags = append(diags, c.decodePolicies(policies, opts)...)
	diags = append(diags, c.decodeColl(colls)...)

	sortDiagnostics(diags, c.Files)
	return c, diags
}

// extraBlocks reports every block of a kind a configuration has one of
// after the first.
func extraBlocks(kind string, blocks []*hcl.Block) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range blocks[1:] {
		diags = append(diags, errorAt(b.DefRange, "Duplicate "+kind+" block",
			fmt.Sprintf("A configuration has one %s block; the first is at %s.", kind, pos(blocks[0].DefRange))))
	}
	return diags
}

func (c *Config) decodeJob(blocks []*hcl.Block) hcl.Diagnostics {
	var diags hcl.Diagnostics
	c.JobParams = defaultJobParams()
	c.Job = jobFromParams(c.JobParams)
	if len(blocks) == 0 {
		return nil
	}
	diags = append(diags, extraBlocks("job", blocks)...)
	b := blocks[0]
	c.JobRange = b.DefRange.Ptr()
	p, ds := c.dec.decodeBody(b.Body, JobParams, b.DefRange)
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return diags
	}
	fillJobBlocks(p)
	prog := p.Blocks("progress")[0]
	if prog.Duration("max_sleep") < prog.Duration("sleep") {
		at := b.DefRange
		if pc, _, _ := b.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "progress"}}}); len(pc.Blocks) > 0 {
			at = pc.Blocks[0].DefRange
		}
		diags = append(diags, errorAt(at, "Invalid progress block",
			fmt.Sprintf("max_sleep (%v) is shorter than sleep (%v); the sleep doubles from sleep up to max_sleep.",
				formatDuration(prog.Duration("max_sleep")), formatDuration(prog.Duration("sleep")))))
		return diags
	}
	c.JobParams = p
	c.Job = jobFromParams(p)
	return diags
}

func (c *Config) decodeBTLs(blocks []*hcl.Block) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := map[[2]string]hcl.Range{}
	for _, b := range blocks {
		kind, name := b.Labels[0], b.Labels[1]
		comp, ok := core.Lookup(core.KindBTL, kind)
		if !ok {
			diags = append(diags, unknownComponent(core.KindBTL, kind, b.LabelRanges[0]))
			continue
		}
		if name == "" {
			diags = append(diags, errorAt(b.LabelRanges[1], "Empty BTL name",
				fmt.Sprintf(`Name the instance: btl %q "<name>" { }.`, kind)))
			continue
		}
		key := [2]string{kind, name}
		if first, dup := seen[key]; dup {
			diags = append(diags, errorAt(b.DefRange, fmt.Sprintf("Duplicate btl %q %q block", kind, name),
				fmt.Sprintf("btl %q %q was already defined at %s; give each instance its own name.", kind, name, pos(first))))
			continue
		}
		seen[key] = b.DefRange
		p, ds := c.dec.decodeBody(b.Body, comp.Params, b.DefRange)
		diags = append(diags, ds...)
		c.BTLs = append(c.BTLs, &BTL{Kind: kind, Name: name, Component: comp, Params: p, DeclRange: b.DefRange})
	}
	return diags
}

// unknownComponent reports a component name that is not registered, with a
// did-you-mean and the list of what is.
func unknownComponent(kind core.Kind, name string, rng hcl.Range) *hcl.Diagnostic {
	names := componentNames(kind)
	detail := fmt.Sprintf("No %s component named %q is compiled in.", kind, name)
	switch s := didYouMean(name, names); {
	case s != "":
		detail += s
	case len(names) == 0:
		detail += fmt.Sprintf(" No %s components are.", kind)
	default:
		detail += fmt.Sprintf(" Available: %s.", quoteList(names))
	}
	return errorAt(rng, fmt.Sprintf("Unknown %s component", kind), detail)
}

// kindNames lists the policy kinds as strings.
func kindNames() []string {
	names := make([]string, len(core.PolicyKinds))
	for i, k := range core.PolicyKinds {
		names[i] = string(k)
	}
	return names
}

func isPolicyKind(k string) bool { return slices.Contains(kindNames(), k) }

// title renders a policy kind for a summary: "flow_control" -> "flow control".
func title(k core.Kind) string { return strings.ReplaceAll(string(k), "_", " ") }
