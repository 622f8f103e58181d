package conf

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/gobtl/gobtl/core"
)

// OnFailure says what a job does when its policy plugin fails.
type OnFailure string

// The on_failure values.
const (
	// OnFailureFallback runs the policy kind's safe default and logs it.
	OnFailureFallback OnFailure = "fallback"
	// OnFailureAbort fails the job.
	OnFailureAbort OnFailure = "abort"
)

// PolicyParams is the schema of the attributes every policy block has,
// whatever its kind; the rest of the block belongs to the policy itself
// and is decoded against the schema the policy declares.
var PolicyParams = []core.Param{
	{Name: "builtin", Type: core.ParamString,
		Doc: "a policy compiled in, run in process (gobtl info lists them); give builtin or plugin"},
	{Name: "plugin", Type: core.ParamString,
		Doc: "a policy plugin, run in its own process and found by the plugin host; give builtin or plugin"},
	{Name: "path", Type: core.ParamString,
		Doc: "the plugin binary, instead of searching for it (plugins only)"},
	{Name: "sha256", Type: core.ParamString, Check: checkSHA256,
		Doc: "expected SHA-256 of the plugin binary, hex; the plugin host refuses another (plugins only)"},
	{Name: "plugin_dir", Type: core.ParamString,
		Doc: "directory searched for the plugin first (plugins only)"},
	{Name: "on_failure", Type: core.ParamString, Default: string(OnFailureFallback),
		Enum: []string{string(OnFailureFallback), string(OnFailureAbort)},
		Doc:  "when the plugin fails or misbehaves: fallback to the kind's safe default and log it, or abort the job"},
}

// pluginOnly are the framework attributes that make sense for plugins only.
var pluginOnly = []string{"path", "sha256", "plugin_dir"}

// Policy is one `policy "<kind>"` block.
type Policy struct {
	Kind core.Kind
	// Name is the builtin's or the plugin's name.
	Name string
	// Plugin: the policy runs out of process (plugin = ...); otherwise it
	// is the compiled-in Component (builtin = ...).
	Plugin    bool
	Component *core.Component
	// Path, SHA256 and PluginDir locate and pin a plugin binary.
	Path      string
	SHA256    string
	PluginDir string
	OnFailure OnFailure
	// Params are the policy's own values. They are valid only when Checked:
	// a plugin body whose schema was not known at load time is kept in
	// Body, to be decoded with DecodePolicy once the plugin is running.
	Params  core.Params
	Checked bool
	// Body is the policy's own part of the block (framework attributes
	// removed).
	Body      hcl.Body
	DeclRange hcl.Range
	// NameRange is where the builtin's or the plugin's name is given.
	NameRange hcl.Range
}

func checkSHA256(v any) error {
	s, _ := v.(string)
	if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
		return fmt.Errorf("%q is not a SHA-256 digest (64 hex digits)", s)
	}
	return nil
}

func (c *Config) decodePolicies(blocks []*hcl.Block, opts Options) hcl.Diagnostics {
	var diags hcl.Diagnostics
	byKind := map[core.Kind]*Policy{}
	for _, b := range blocks {
		kind := core.Kind(b.Labels[0])
		if !isPolicyKind(string(kind)) {
			diags = append(diags, errorAt(b.LabelRanges[0], "Unknown policy kind",
				fmt.Sprintf("%q is not a policy kind; the kinds are %s.%s", kind, quoteList(kindNames()), didYouMean(string(kind), kindNames()))))
			continue
		}
		if first, dup := byKind[kind]; dup {
			diags = append(diags, errorAt(b.DefRange, fmt.Sprintf("Duplicate policy %q block", kind),
				fmt.Sprintf("A job has one %s policy; the first is at %s.", title(kind), pos(first.DeclRange))))
			continue
		}
		p, ds := c.decodePolicy(b, kind, opts)
		diags = append(diags, ds...)
		if p != nil {
			byKind[kind] = p
		}
	}
	for _, k := range core.PolicyKinds {
		if p := byKind[k]; p != nil {
			c.Policies = append(c.Policies, p)
		}
	}
	return diags
}

func (c *Config) decodePolicy(b *hcl.Block, kind core.Kind, opts Options) (*Policy, hcl.Diagnostics) {
	content, remain, diags := b.Body.PartialContent(bodySchema(PolicyParams))
	fw, ds := c.dec.decodeContent(content, PolicyParams, b.DefRange)
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
	p := &Policy{
		Kind:      kind,
		Path:      fw.String("path"),
		SHA256:    fw.String("sha256"),
		PluginDir: fw.String("plugin_dir"),
		OnFailure: OnFailure(fw.String("on_failure")),
		Body:      remain,
		DeclRange: b.DefRange,
	}
	builtin, plugin := content.Attributes["builtin"], content.Attributes["plugin"]
	switch {
	case builtin != nil && plugin != nil:
		return nil, append(diags, errorAt(plugin.NameRange, "Both builtin and plugin",
			fmt.Sprintf("A policy is either compiled in or a plugin; builtin is already given at %s.", pos(builtin.NameRange))))
	case builtin == nil && plugin == nil:
		return nil, append(diags, errorAt(b.DefRange, fmt.Sprintf("Missing builtin or plugin in policy %q", kind),
			fmt.Sprintf(`Name the implementation: builtin = "<name>" (compiled in: %s) or plugin = "<name>".`, quoteList(componentNames(kind)))))
	case builtin != nil:
		for _, name := range pluginOnly {
			if a := content.Attributes[name]; a != nil {
				diags = append(diags, errorAt(a.NameRange, fmt.Sprintf("%s applies to plugins only", name),
					fmt.Sprintf("Policy %q is the builtin %q; remove %s or use plugin = %q.", kind, fw.String("builtin"), name, fw.String("builtin"))))
			}
		}
		p.Name, p.NameRange = fw.String("builtin"), builtin.Expr.Range()
		comp, ok := core.Lookup(kind, p.Name)
		if !ok {
			return nil, append(diags, unknownComponent(kind, p.Name, builtin.Expr.Range()))
		}
		diags = append(diags, renamed(kind, &p.Name, builtin.Expr.Range())...)
		p.Component = comp
		params, ds := c.dec.decodeBody(remain, comp.Params, b.DefRange)
		p.Params, p.Checked = params, true
		diags = append(diags, ds...)
		if opts.CheckPolicy != nil && !ds.HasErrors() {
			diags = append(diags, opts.CheckPolicy(c, p)...)
		}
		return p, diags
	}
	p.Name, p.Plugin, p.NameRange = fw.String("plugin"), true, plugin.Expr.Range()
	if p.Name == "" {
		return nil, append(diags, errorAt(plugin.Expr.Range(), "Empty plugin name", "Name the plugin: plugin = \"<name>\"."))
	}
	// The plugins that serve built-ins carry the built-in's name, and its
	// former names with it.
	diags = append(diags, renamed(kind, &p.Name, plugin.Expr.Range())...)
	if opts.CheckPolicy == nil {
		diags = append(diags, c.dec.checkBodyRefs(remain, true)...)
		diags = append(diags, warningAt(b.DefRange, fmt.Sprintf("Policy %q body not checked", kind),
			fmt.Sprintf("The schema of plugin %q is known only once the plugin runs; its parameters are checked then.", p.Name)))
		return p, diags
	}
	return p, append(diags, opts.CheckPolicy(c, p)...)
}

// ValueError is the diagnostic of a policy's refusal of its values — a
// built-in's constructor or a plugin's own checks said msg. A parameter's
// check reads "name: why": it is reported at that attribute; anything
// else at the block.
func (p *Policy) ValueError(msg string) *hcl.Diagnostic {
	summary := fmt.Sprintf("Invalid %s policy %q configuration", title(p.Kind), p.Name)
	if name, why, ok := strings.Cut(msg, ": "); ok {
		attrs, _ := rawBody(p.Body, true)
		for _, a := range attrs {
			if a.Name == name {
				return errorAt(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", name), sentence(why))
			}
		}
	}
	return errorAt(p.DeclRange, summary, sentence(msg))
}

// StartError is the diagnostic of a policy that could not be built at
// all (a plugin not found, not a plugin, its pin not matched): at its
// name.
func (p *Policy) StartError(err error) *hcl.Diagnostic {
	return errorAt(p.NameRange, fmt.Sprintf("Cannot start %s plugin %q", title(p.Kind), p.Name), sentence(err.Error()))
}

// renamed replaces a policy's former name (core.Component.Deprecated)
// with its name, and warns.
func renamed(kind core.Kind, name *string, rng hcl.Range) hcl.Diagnostics {
	comp, ok := core.Lookup(kind, *name)
	if !ok || comp.Name == *name {
		return nil
	}
	d := warningAt(rng, fmt.Sprintf("Deprecated %s policy name %q", title(kind), *name),
		fmt.Sprintf("%q is now called %q; the old name still loads, but will not for ever.", *name, comp.Name))
	*name = comp.Name
	return hcl.Diagnostics{d}
}

// DecodePolicy decodes a policy's body against schema (a plugin's, once
// the plugin host has it) with the configuration's variables, and marks
// the policy checked. Diagnostics point into the original file.
func (c *Config) DecodePolicy(p *Policy, schema []core.Param) hcl.Diagnostics {
	params, diags := c.dec.decodeBody(p.Body, schema, p.DeclRange)
	if diags.HasErrors() {
		return diags
	}
	p.Params, p.Checked = params, true
	return diags
}

// checkBodyRefs checks the variable references of a body that cannot be
// decoded yet, so that a misspelt var.name is reported at load time.
func (d *decoder) checkBodyRefs(body hcl.Body, top bool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	attrs, blocks := rawBody(body, top)
	for _, a := range attrs {
		diags = append(diags, d.checkRefs(a.Expr)...)
	}
	for _, blk := range blocks {
		diags = append(diags, d.checkBodyRefs(blk.Body, false)...)
	}
	return diags
}

// rawBody is the content of a body no schema has decoded: its attributes
// in name order and its blocks. At the top of a policy block (top), the
// framework's attributes belong to the framework and are left out.
func rawBody(body hcl.Body, top bool) ([]*hclsyntax.Attribute, []*hclsyntax.Block) {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return nil, nil
	}
	var attrs []*hclsyntax.Attribute
	for _, name := range sortedKeys(sb.Attributes) {
		if !top || !isFrameworkAttr(name) {
			attrs = append(attrs, sb.Attributes[name])
		}
	}
	return attrs, sb.Blocks
}

func isFrameworkAttr(name string) bool {
	return slices.ContainsFunc(PolicyParams, func(p core.Param) bool { return p.Name == name })
}

func componentNames(kind core.Kind) []string {
	var names []string
	for _, comp := range core.Components(kind) {
		names = append(names, comp.Name)
	}
	return names
}
