package conf

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/gobtl/gobtl/core"
)

// WriteHCL writes the effective configuration as HCL: every block with
// every parameter, defaults filled in and variables resolved. Parameters
// without a value are listed as comments. The output loads back to the same
// configuration.
func (c *Config) WriteHCL(w io.Writer) error {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	of := strings.Join(c.Files, ", ")
	if of == "" {
		of = DefaultStackName
	}
	body.AppendUnstructuredTokens(comment("effective configuration of " + of))
	writeParams(body.AppendNewBlock("job", nil).Body(), c.JobParams)
	if c.DefaultBTLs {
		body.AppendNewline()
		body.AppendUnstructuredTokens(comment("the default stack's transports (no file names a btl block); a job on one node leaves out the network ones"))
		if c.Net != "" {
			body.AppendUnstructuredTokens(comment("net: " + c.Net))
		}
	}
	for i, b := range c.BTLs {
		if i > 0 || !c.DefaultBTLs {
			body.AppendNewline()
		}
		writeParams(body.AppendNewBlock("btl", []string{b.Kind, b.Name}).Body(), b.Params)
	}
	for _, p := range c.Policies {
		body.AppendNewline()
		pb := body.AppendNewBlock("policy", []string{string(p.Kind)}).Body()
		if p.Plugin {
			pb.SetAttributeValue("plugin", cty.StringVal(p.Name))
			for _, a := range []struct{ name, val string }{{"path", p.Path}, {"sha256", p.SHA256}, {"plugin_dir", p.PluginDir}} {
				if a.val != "" {
					pb.SetAttributeValue(a.name, cty.StringVal(a.val))
				}
			}
		} else {
			pb.SetAttributeValue("builtin", cty.StringVal(p.Name))
		}
		pb.SetAttributeValue("on_failure", cty.StringVal(string(p.OnFailure)))
		if p.Checked {
			writeParams(pb, p.Params)
			continue
		}
		pb.AppendUnstructuredTokens(comment("not checked: the plugin's schema is known only once it runs"))
		c.writeRaw(pb, p.Body, true)
	}
	if c.Coll.Schema() != nil {
		body.AppendNewline()
		writeParams(body.AppendNewBlock("coll", nil).Body(), c.Coll)
	}
	_, err := w.Write(hclwrite.Format(f.Bytes()))
	return err
}

func comment(s string) hclwrite.Tokens {
	return hclwrite.Tokens{{Type: hclsyntax.TokenComment, Bytes: []byte("# " + s + "\n")}}
}

func writeParams(body *hclwrite.Body, p core.Params) {
	for _, d := range p.Schema() {
		if d.Type == core.ParamBlock {
			for _, nested := range p.Blocks(d.Name) {
				writeParams(body.AppendNewBlock(d.Name, nil).Body(), nested)
			}
			continue
		}
		v, ok := p.Value(d.Name)
		if !ok {
			body.AppendUnstructuredTokens(comment(d.Name + ": not set"))
			continue
		}
		body.SetAttributeValue(d.Name, ctyValue(d.Type, v))
	}
}

// ctyValue renders a decoded value as the HCL value that decodes back to
// it: sizes, rates and durations as strings with units.
func ctyValue(t core.ParamType, v any) cty.Value {
	switch x := v.(type) {
	case string:
		return cty.StringVal(x)
	case bool:
		return cty.BoolVal(x)
	case int64:
		if t == core.ParamSize {
			return cty.StringVal(core.FormatSize(x))
		}
		return cty.NumberIntVal(x)
	case float64:
		if t == core.ParamRate {
			return cty.StringVal(formatRate(x))
		}
		return cty.NumberFloatVal(x)
	case time.Duration:
		return cty.StringVal(formatDuration(x))
	case []string:
		if len(x) == 0 {
			return cty.ListValEmpty(cty.String)
		}
		l := make([]cty.Value, len(x))
		for i, s := range x {
			l[i] = cty.StringVal(s)
		}
		return cty.ListVal(l)
	case map[string]string:
		if len(x) == 0 {
			return cty.MapValEmpty(cty.String)
		}
		m := make(map[string]cty.Value, len(x))
		for k, s := range x {
			m[k] = cty.StringVal(s)
		}
		return cty.MapVal(m)
	}
	return cty.StringVal(fmt.Sprint(v))
}

// formatRate renders a rate exactly (core.FormatRate rounds to four
// digits), in the largest SI unit it reaches.
func formatRate(r float64) string {
	for _, u := range []struct {
		div  float64
		name string
	}{{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"}} {
		if r >= u.div {
			return strconv.FormatFloat(r/u.div, 'g', -1, 64) + u.name + "/s"
		}
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + "B/s"
}

// formatDuration is time.Duration.String with an ASCII "us".
func formatDuration(d time.Duration) string {
	return strings.ReplaceAll(d.String(), "µs", "us")
}

// writeRaw writes an undecoded body's attributes (evaluated, so variables
// are resolved) and blocks.
func (c *Config) writeRaw(body *hclwrite.Body, src hcl.Body, top bool) {
	attrs, blocks := rawBody(src, top)
	for _, a := range attrs {
		if v, diags := a.Expr.Value(c.dec.ctx); !diags.HasErrors() && v.IsWhollyKnown() {
			body.SetAttributeValue(a.Name, v)
		}
	}
	for _, blk := range blocks {
		c.writeRaw(body.AppendNewBlock(blk.Type, blk.Labels).Body(), blk.Body, false)
	}
}

// MarshalJSON renders the effective configuration as JSON. Sizes are
// bytes, rates bytes per second, durations strings ("500us"); a
// parameter without a value is null; a non-repeated nested block is an
// object, a repeated one an array.
func (c *Config) MarshalJSON() ([]byte, error) {
	type btl struct {
		Kind   string         `json:"kind"`
		Name   string         `json:"name"`
		Params map[string]any `json:"params"`
	}
	type policy struct {
		Kind      core.Kind      `json:"kind"`
		Builtin   string         `json:"builtin,omitempty"`
		Plugin    string         `json:"plugin,omitempty"`
		Path      string         `json:"path,omitempty"`
		SHA256    string         `json:"sha256,omitempty"`
		PluginDir string         `json:"plugin_dir,omitempty"`
		OnFailure OnFailure      `json:"on_failure"`
		Checked   bool           `json:"checked"`
		Params    map[string]any `json:"params"`
	}
	type variable struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Value       json.RawMessage `json:"value"`
		Source      string          `json:"source"`
	}
	out := struct {
		Files       []string   `json:"files"`
		Job         any        `json:"job"`
		BTLs        []btl      `json:"btl"`
		DefaultBTLs bool       `json:"default_btls,omitempty"`
		Net         string     `json:"net,omitempty"`
		Policies    []policy   `json:"policy"`
		Variables   []variable `json:"variables"`
		Coll        any        `json:"coll,omitempty"`
	}{Files: c.Files, Job: paramsJSON(c.JobParams), BTLs: []btl{}, DefaultBTLs: c.DefaultBTLs, Net: c.Net, Policies: []policy{}, Variables: []variable{}}
	if c.Coll.Schema() != nil {
		out.Coll = paramsJSON(c.Coll)
	}
	for _, b := range c.BTLs {
		out.BTLs = append(out.BTLs, btl{Kind: b.Kind, Name: b.Name, Params: paramsJSON(b.Params)})
	}
	for _, p := range c.Policies {
		jp := policy{Kind: p.Kind, Path: p.Path, SHA256: p.SHA256, PluginDir: p.PluginDir, OnFailure: p.OnFailure, Checked: p.Checked}
		if p.Plugin {
			jp.Plugin = p.Name
		} else {
			jp.Builtin = p.Name
		}
		if p.Checked {
			jp.Params = paramsJSON(p.Params)
		} else {
			jp.Params = c.rawJSON(p.Body, true)
		}
		out.Policies = append(out.Policies, jp)
	}
	for _, v := range c.Variables {
		out.Variables = append(out.Variables, variable{Name: v.Name, Description: v.Description, Value: ctyJSON(v.Value), Source: v.Source})
	}
	return json.Marshal(out)
}

func paramsJSON(p core.Params) map[string]any {
	m := map[string]any{}
	for _, d := range p.Schema() {
		v, ok := p.Value(d.Name)
		switch {
		case d.Type == core.ParamBlock:
			var blocks []map[string]any
			for _, nested := range p.Blocks(d.Name) {
				blocks = append(blocks, paramsJSON(nested))
			}
			switch {
			case d.Repeat && blocks == nil:
				m[d.Name] = []map[string]any{}
			case d.Repeat:
				m[d.Name] = blocks
			case len(blocks) == 0:
				m[d.Name] = nil
			default:
				m[d.Name] = blocks[0]
			}
		case !ok:
			m[d.Name] = nil
		case d.Type == core.ParamDuration:
			m[d.Name] = formatDuration(v.(time.Duration))
		default:
			m[d.Name] = v
		}
	}
	return m
}

func (c *Config) rawJSON(src hcl.Body, top bool) map[string]any {
	m := map[string]any{}
	attrs, blocks := rawBody(src, top)
	for _, a := range attrs {
		if v, diags := a.Expr.Value(c.dec.ctx); !diags.HasErrors() {
			m[a.Name] = ctyJSON(v)
		}
	}
	for _, blk := range blocks {
		l, _ := m[blk.Type].([]map[string]any)
		m[blk.Type] = append(l, c.rawJSON(blk.Body, false))
	}
	return m
}

func ctyJSON(v cty.Value) json.RawMessage {
	if !v.IsWhollyKnown() {
		return json.RawMessage("null")
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}
