package conf

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// EnvVarPrefix prefixes the environment variables that set configuration
// variables: GOBTL_VAR_rails=2 sets var.rails.
const EnvVarPrefix = "GOBTL_VAR_"

// Variable is a declared configuration variable and the value it took.
type Variable struct {
	Name        string
	Description string
	// Value is the effective value: a --var override, else GOBTL_VAR_<name>,
	// else the default.
	Value cty.Value
	// Source says where Value came from: "default", "--var" or the
	// environment variable's name.
	Source    string
	DeclRange hcl.Range
}

var variableSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "default"},
	{Name: "description"},
}}

// decodeVariables decodes the variable blocks of every file and applies
// the overrides. It returns the variables in declaration order.
func decodeVariables(blocks []*hcl.Block, opts Options) ([]*Variable, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var vars []*Variable
	seen := map[string]*Variable{}
	for _, b := range blocks {
		name := b.Labels[0]
		if !hclsyntax.ValidIdentifier(name) {
			diags = append(diags, errorAt(b.LabelRanges[0], "Invalid variable name",
				fmt.Sprintf("%q is not a valid name: use letters, digits, underscores and dashes, starting with a letter.", name)))
			continue
		}
		if first, dup := seen[name]; dup {
			diags = append(diags, errorAt(b.DefRange, fmt.Sprintf("Duplicate variable %q", name),
				fmt.Sprintf("Variable %q was already declared at %s.", name, pos(first.DeclRange))))
			continue
		}
		content, ds := b.Body.Content(variableSchema)
		diags = append(diags, ds...)
		v := &Variable{Name: name, DeclRange: b.DefRange, Value: cty.NullVal(cty.DynamicPseudoType)}
		if a, ok := content.Attributes["description"]; ok {
			d, ds := a.Expr.Value(nil)
			diags = append(diags, ds...)
			if !ds.HasErrors() {
				if s, err := convert.Convert(d, cty.String); err != nil || s.IsNull() || !s.IsKnown() {
					diags = append(diags, errorAt(a.Expr.Range(), "Invalid description", "The description must be a string."))
				} else {
					v.Description = s.AsString()
				}
			}
		}
		hasDefault := false
		if a, ok := content.Attributes["default"]; ok {
			d, ds := a.Expr.Value(nil)
			diags = append(diags, ds...)
			if ds.HasErrors() {
				v.Value = cty.DynamicVal
			} else {
				v.Value, v.Source, hasDefault = d, "default", true
			}
		}
		diags = append(diags, v.override(opts)...)
		if v.Source == "" && !hasDefault && v.Value.IsKnown() {
			diags = append(diags, errorAt(b.DefRange, fmt.Sprintf("No value for variable %q", name),
				fmt.Sprintf("Variable %q has no default; set it with --var %s=VALUE or %s%s.", name, name, EnvVarPrefix, name)))
			v.Value = cty.DynamicVal
		}
		seen[name] = v
		vars = append(vars, v)
	}
	for _, name := range sortedKeys(opts.Vars) {
		if _, ok := seen[name]; !ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail: fmt.Sprintf("--var %s was given but no variable %q is declared.%s",
					name, name, didYouMean(name, sortedKeys(seen))),
			})
		}
	}
	return vars, diags
}

// override applies --var, then GOBTL_VAR_<name>. An override is text: it
// is taken as a string unless the default is a collection, in which case
// it is parsed as an HCL expression (as Terraform does with -var).
func (v *Variable) override(opts Options) hcl.Diagnostics {
	raw, src, label := "", "", ""
	if s, ok := opts.Vars[v.Name]; ok {
		raw, src, label = s, "--var", "--var "+v.Name
	} else if s, ok := opts.lookupEnv(EnvVarPrefix + v.Name); ok {
		raw, src, label = s, EnvVarPrefix+v.Name, EnvVarPrefix+v.Name
	} else {
		return nil
	}
	def := v.Value
	if def.IsNull() || !def.IsKnown() || def.Type().IsPrimitiveType() {
		val := cty.StringVal(raw)
		if def.IsKnown() && !def.IsNull() && def.Type() != cty.String {
			// A number or bool default says what the variable holds:
			// check the override now, at the declaration, not at each use.
			conv, err := convert.Convert(val, def.Type())
			if err != nil {
				v.Value = cty.DynamicVal
				return hcl.Diagnostics{errorAt(v.DeclRange, fmt.Sprintf("Invalid value for variable %q", v.Name),
					fmt.Sprintf("%s=%q: want a %s like the default.", label, raw, def.Type().FriendlyName()))}
			}
			val = conv
		}
		v.Value, v.Source = val, src
		return nil
	}
	expr, diags := hclsyntax.ParseExpression([]byte(raw), label, hcl.InitialPos)
	if diags.HasErrors() {
		v.Value = cty.DynamicVal
		return diags
	}
	val, diags := expr.Value(nil)
	if diags.HasErrors() {
		v.Value = cty.DynamicVal
		return diags
	}
	v.Value, v.Source = val, src
	return nil
}

// evalContext exposes the variables as the var object.
func evalContext(vars []*Variable) *hcl.EvalContext {
	m := make(map[string]cty.Value, len(vars))
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(m)}}
}
