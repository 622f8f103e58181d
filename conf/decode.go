package conf

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/gobtl/gobtl/core"
)

// decoder turns HCL bodies into core.Params against a component's schema.
// It carries the evaluation context (the var object) through one load.
type decoder struct {
	ctx      *hcl.EvalContext
	varNames []string // declared variables, for did-you-mean
}

// bodySchema is the HCL shape of a parameter schema: attributes for values,
// label-less blocks for ParamBlock.
func bodySchema(schema []core.Param) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for i := range schema {
		p := &schema[i]
		if p.Type == core.ParamBlock {
			s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: p.Name})
			continue
		}
		// Required is checked by decodeContent, which knows the block the
		// body belongs to: hcl would point into the body instead.
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: p.Name})
	}
	return s
}

// decodeBody decodes body against schema. Unknown attributes and blocks
// are errors with a did-you-mean; parameters not set keep their defaults.
// block is where the body's block is declared: missing required
// parameters are reported there.
func (d *decoder) decodeBody(body hcl.Body, schema []core.Param, block hcl.Range) (core.Params, hcl.Diagnostics) {
	content, diags := body.Content(bodySchema(schema))
	p, ds := d.decodeContent(content, schema, block)
	return p, append(diags, ds...)
}

func (d *decoder) decodeContent(content *hcl.BodyContent, schema []core.Param, block hcl.Range) (core.Params, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	p, err := core.NewParams(schema)
	if err != nil {
		// Only a plugin's schema can get here: registered ones were
		// checked by core.Register.
		diags = append(diags, errorAt(block, "Invalid parameter schema", sentence(err.Error())))
		return core.Params{}, diags
	}
	for i := range schema {
		param := &schema[i]
		if param.Type == core.ParamBlock {
			diags = append(diags, d.decodeBlocks(p, param, content, block)...)
			continue
		}
		attr, ok := content.Attributes[param.Name]
		if !ok {
			if param.Required {
				diags = append(diags, errorAt(block, "Missing required argument",
					fmt.Sprintf("The argument %q is required, but no definition was found.", param.Name)))
			}
			continue
		}
		v, ok, ds := d.attrValue(attr, param)
		diags = append(diags, ds...)
		if !ok {
			continue
		}
		if err := p.Set(param.Name, v); err != nil {
			// The value was enum- and range-checked in attrValue; Set can
			// only fail on a schema/accessor mismatch.
			diags = append(diags, errorAt(attr.Expr.Range(), fmt.Sprintf("Invalid value for %q", param.Name), err.Error()))
		}
	}
	return p, diags
}

func (d *decoder) decodeBlocks(p core.Params, param *core.Param, content *hcl.BodyContent, parent hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	blocks := content.Blocks.OfType(param.Name)
	if !param.Repeat && len(blocks) > 1 {
		for _, b := range blocks[1:] {
			diags = append(diags, errorAt(b.DefRange, fmt.Sprintf("Duplicate %s block", param.Name),
				fmt.Sprintf("Only one %s block is allowed here; the first is at %s.", param.Name, pos(blocks[0].DefRange))))
		}
		blocks = blocks[:1]
	}
	if param.Required && len(blocks) == 0 {
		diags = append(diags, errorAt(parent, fmt.Sprintf("Missing %s block", param.Name),
			fmt.Sprintf("A %s block is required here.", param.Name)))
	}
	if len(blocks) == 0 {
		return diags
	}
	nested := make([]core.Params, 0, len(blocks))
	for _, b := range blocks {
		np, ds := d.decodeBody(b.Body, param.Block, b.DefRange)
		diags = append(diags, ds...)
		nested = append(nested, np)
	}
	if err := p.Set(param.Name, nested); err != nil {
		diags = append(diags, errorAt(blocks[0].DefRange, fmt.Sprintf("Invalid %s block", param.Name), err.Error()))
	}
	return diags
}

// attrValue evaluates attr and converts it to the Go type of param. ok is
// false when there is nothing to set: an error (reported), a null (which
// keeps the default, as in Terraform) or an unknown value (from a variable
// whose own error was already reported).
func (d *decoder) attrValue(attr *hcl.Attribute, param *core.Param) (v any, ok bool, diags hcl.Diagnostics) {
	val, diags := d.eval(attr.Expr)
	if diags.HasErrors() || val.IsNull() || !val.IsWhollyKnown() {
		return nil, false, diags
	}
	rng := attr.Expr.Range()
	summary := fmt.Sprintf("Invalid value for %q", param.Name)
	v, err := convertValue(val, param.Type)
	if err != nil {
		return nil, false, append(diags, errorAt(rng, summary, err.Error()))
	}
	if len(param.Enum) > 0 {
		s := v.(string)
		if !slices.Contains(param.Enum, s) {
			return nil, false, append(diags, errorAt(rng, summary,
				fmt.Sprintf("%q is not one of %s.%s", s, quoteList(param.Enum), didYouMean(s, param.Enum))))
		}
	}
	if err := param.CheckValue(v); err != nil { // the range and Check
		return nil, false, append(diags, errorAt(rng, summary, sentence(err.Error())))
	}
	return v, true, diags
}

// eval evaluates expr after checking that it refers only to declared
// variables, so that a typo gets a did-you-mean instead of hcl's generic
// "unsupported attribute".
func (d *decoder) eval(expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	if diags := d.checkRefs(expr); diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	return expr.Value(d.ctx)
}

func (d *decoder) checkRefs(expr hcl.Expression) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		rng := tr.SourceRange()
		root := tr.RootName()
		if root != "var" {
			hint := " Variables are referenced as var.<name>."
			if slices.Contains(d.varNames, root) {
				hint = fmt.Sprintf(" Did you mean var.%s?", root)
			}
			diags = append(diags, errorAt(rng, "Unknown reference",
				fmt.Sprintf("There is no symbol named %q.%s", root, hint)))
			continue
		}
		name, ok := "", false
		if len(tr) > 1 {
			switch step := tr[1].(type) {
			case hcl.TraverseAttr:
				name, ok = step.Name, true
			case hcl.TraverseIndex:
				if step.Key.Type() == cty.String && step.Key.IsKnown() && !step.Key.IsNull() {
					name, ok = step.Key.AsString(), true
				}
			}
		}
		if !ok {
			diags = append(diags, errorAt(rng, "Invalid variable reference", "A variable is referenced as var.<name>."))
			continue
		}
		if !slices.Contains(d.varNames, name) {
			diags = append(diags, errorAt(rng, "Reference to undeclared variable",
				fmt.Sprintf("No variable %q is declared; declare it with a variable %q { } block.%s", name, name, didYouMean(name, d.varNames))))
		}
	}
	return diags
}

// convertValue converts an HCL value to the Go type that core.Params holds
// for t. Sizes take plain byte counts or strings with units; rates and
// durations take strings with units (a bare number is bytes per second for
// a rate, and only 0 for a duration).
func convertValue(v cty.Value, t core.ParamType) (any, error) {
	switch t {
	case core.ParamString:
		s, err := convert.Convert(v, cty.String)
		if err != nil {
			return nil, fmt.Errorf("want a string, got %s.", v.Type().FriendlyName())
		}
		return s.AsString(), nil
	case core.ParamInt:
		return toInt(v)
	case core.ParamFloat:
		return toFloat(v)
	case core.ParamBool:
		b, err := convert.Convert(v, cty.Bool)
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %s.", describe(v))
		}
		return b.True(), nil
	case core.ParamSize:
		return toSize(v)
	case core.ParamRate:
		return toRate(v)
	case core.ParamDuration:
		return toDuration(v)
	case core.ParamStrings:
		return toStrings(v)
	case core.ParamMap:
		return toStringMap(v)
	}
	return nil, fmt.Errorf("parameters of type %v cannot be set by an attribute.", t)
}

// toInt converts a whole number (or a string of one) to an int64.
func toInt(v cty.Value) (any, error) {
	n, err := toNumber(v, "an integer")
	if err != nil {
		return nil, err
	}
	i, acc := n.Int64()
	if !n.IsInt() || acc != big.Exact {
		return nil, fmt.Errorf("want an integer, got %s.", n.Text('g', -1))
	}
	return i, nil
}

// toFloat converts a finite number (or a string of one) to a float64.
func toFloat(v cty.Value) (any, error) {
	n, err := toNumber(v, "a number")
	if err != nil {
		return nil, err
	}
	f, _ := n.Float64()
	if math.IsInf(f, 0) {
		return nil, fmt.Errorf("%s is out of range.", n.Text('g', 6))
	}
	return f, nil
}

// toSize converts a whole, non-negative number of bytes, or a string with
// units ("12KiB"), to an int64.
func toSize(v cty.Value) (any, error) {
	if v.Type() == cty.Number {
		n := v.AsBigFloat()
		i, acc := n.Int64()
		if !n.IsInt() || acc != big.Exact || i < 0 {
			return nil, fmt.Errorf("want a whole, non-negative number of bytes, got %s.", n.Text('g', -1))
		}
		return i, nil
	}
	return parseString(v, `a size like 4096 or "12KiB"`, core.ParseSize)
}

// toRate converts a non-negative number of bytes per second, or a string
// with units ("1GB/s"), to a float64.
func toRate(v cty.Value) (any, error) {
	if v.Type() == cty.Number {
		f, _ := v.AsBigFloat().Float64()
		if f < 0 || math.IsInf(f, 0) {
			return nil, fmt.Errorf("want a non-negative rate, got %s.", v.AsBigFloat().Text('g', 6))
		}
		return f, nil
	}
	return parseString(v, `a rate like "1GB/s"`, core.ParseRate)
}

// toDuration converts a string with units ("500us") to a time.Duration.
// The only bare number taken is 0: any other would have to guess a unit.
func toDuration(v cty.Value) (any, error) {
	if v.Type() == cty.Number {
		if v.AsBigFloat().Sign() == 0 {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf(`a duration needs a unit: write "%sms" or "%sus", say.`, v.AsBigFloat().Text('g', -1), v.AsBigFloat().Text('g', -1))
	}
	return parseString(v, `a duration like "500us"`, core.ParseDuration)
}

// toStrings converts a list, tuple or set of strings (or of values that
// convert to strings) to a []string; a null element is an error.
func toStrings(v cty.Value) (any, error) {
	ty := v.Type()
	if !ty.IsListType() && !ty.IsTupleType() && !ty.IsSetType() {
		return nil, fmt.Errorf(`want a list of strings like ["a", "b"], got %s.`, ty.FriendlyName())
	}
	l, err := convert.Convert(v, cty.List(cty.String))
	if err != nil {
		return nil, fmt.Errorf("want a list of strings: %v.", err)
	}
	out := make([]string, 0, l.LengthInt())
	for it := l.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, fmt.Errorf("element %d of the list is null.", len(out))
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

// toStringMap converts an object or map of strings to a
// map[string]string; a null value is an error.
func toStringMap(v cty.Value) (any, error) {
	ty := v.Type()
	if !ty.IsObjectType() && !ty.IsMapType() {
		return nil, fmt.Errorf(`want a map like { key = "value" }, got %s.`, ty.FriendlyName())
	}
	m, err := convert.Convert(v, cty.Map(cty.String))
	if err != nil {
		return nil, fmt.Errorf("want a map of strings: %v.", err)
	}
	out := map[string]string{}
	for it := m.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() {
			return nil, fmt.Errorf("the value of %q is null.", k.AsString())
		}
		out[k.AsString()] = e.AsString()
	}
	return out, nil
}

// parseString parses a string value with one of core's unit parsers; want
// describes the accepted form for the error about another type.
func parseString[T any](v cty.Value, want string, parse func(string) (T, error)) (any, error) {
	if v.Type() != cty.String {
		return nil, fmt.Errorf("want %s, got %s.", want, v.Type().FriendlyName())
	}
	x, err := parse(v.AsString())
	if err != nil {
		return nil, fmt.Errorf("%v.", err)
	}
	return x, nil
}

func toNumber(v cty.Value, want string) (*big.Float, error) {
	n, err := convert.Convert(v, cty.Number)
	if err != nil {
		return nil, fmt.Errorf("want %s, got %s.", want, describe(v))
	}
	return n.AsBigFloat(), nil
}

// describe names a value for an error: the string itself when it is a
// string ("want an integer, got "12KiB""), else its type.
func describe(v cty.Value) string {
	if v.Type() == cty.String {
		return fmt.Sprintf("%q", v.AsString())
	}
	return v.Type().FriendlyName()
}

func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// sentence turns an error message into a diagnostic detail: capitalized,
// ending in a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	if s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	if !strings.ContainsAny(s[len(s)-1:], ".?!") {
		s += "."
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
