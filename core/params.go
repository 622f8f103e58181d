package core

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ParamType is the type of a component parameter.
type ParamType uint8

// Parameter types. The Go type a Params accessor returns is given for each.
const (
	ParamString   ParamType = iota + 1 // string
	ParamInt                           // int64
	ParamFloat                         // float64
	ParamBool                          // bool
	ParamSize                          // int64 bytes: 4096, "12KiB", "1MB"
	ParamRate                          // float64 bytes/s: "1GB/s"
	ParamDuration                      // time.Duration: "500us"
	ParamStrings                       // []string
	ParamBlock                         // []Params, a nested block with its own schema
	ParamMap                           // map[string]string: { pml = "debug" }
)

var paramTypeNames = [...]string{
	ParamString: "string", ParamInt: "int", ParamFloat: "float", ParamBool: "bool",
	ParamSize: "size", ParamRate: "rate", ParamDuration: "duration",
	ParamStrings: "list(string)", ParamBlock: "block", ParamMap: "map(string)",
}

func (t ParamType) String() string {
	if int(t) < len(paramTypeNames) && paramTypeNames[t] != "" {
		return paramTypeNames[t]
	}
	return fmt.Sprintf("ParamType(%d)", uint8(t))
}

// Param declares one configuration parameter of a component: its name in
// the component's HCL block, type, default and documentation (UCX's config
// tables, Nomad's ConfigSchema). The configuration loader decodes a block
// against the schema its component declares, so errors point at the line.
type Param struct {
	Name string
	Type ParamType
	// Default is the textual default ("12KiB", "8", "true"); empty means
	// the parameter has no value unless set.
	Default string
	Doc     string
	// Enum lists the allowed values of a string parameter.
	Enum []string
	// Required parameters must be set.
	Required bool
	// Min and Max bound a numeric parameter (int, float, size, rate,
	// duration), both inclusive, in the textual form of Default ("1KiB",
	// "10us"); empty leaves that side open. Being data, the range is shown
	// by `gobtl info`, checked against the default at registration, and
	// reported by the loader at the value's position in the file.
	Min, Max string
	// Check, if set, validates a decoded value (of the accessor's Go type)
	// beyond its range: a power of two, a checksum's form.
	Check func(v any) error
	// Block is the schema of a ParamBlock; Repeat lets the block appear more
	// than once.
	Block  []Param
	Repeat bool
}

// ParseValue parses the textual form of a value of type t, as used by
// defaults and command-line overrides.
func ParseValue(t ParamType, s string) (any, error) {
	switch t {
	case ParamString:
		return s, nil
	case ParamInt:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", s)
		}
		return n, nil
	case ParamFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	case ParamBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not a bool (true or false)", s)
		}
		return b, nil
	case ParamSize:
		return ParseSize(s)
	case ParamRate:
		return ParseRate(s)
	case ParamDuration:
		return ParseDuration(s)
	case ParamStrings:
		if strings.TrimSpace(s) == "" {
			return []string{}, nil
		}
		parts := strings.Split(s, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts, nil
	case ParamMap:
		m := map[string]string{}
		if strings.TrimSpace(s) == "" {
			return m, nil
		}
		for _, kv := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("%q is not a map (key=value,key=value)", s)
			}
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		return m, nil
	}
	return nil, fmt.Errorf("type %v has no textual form", t)
}

// CheckValue applies a parameter's enum, range and Check to a decoded
// value.
func (p *Param) CheckValue(v any) error {
	if len(p.Enum) > 0 {
		s, _ := v.(string)
		if !slices.Contains(p.Enum, s) {
			return fmt.Errorf("%q is not one of %s", s, strings.Join(p.Enum, ", "))
		}
	}
	if err := p.checkRange(v); err != nil {
		return err
	}
	if p.Check != nil {
		return p.Check(v)
	}
	return nil
}

// Range renders the parameter's bounds for documentation: "[1KiB, 64MiB]",
// ">= 1", "<= 7", or "" when it has none.
func (p *Param) Range() string {
	switch {
	case p.Min != "" && p.Max != "":
		return "[" + p.Min + ", " + p.Max + "]"
	case p.Min != "":
		return ">= " + p.Min
	case p.Max != "":
		return "<= " + p.Max
	}
	return ""
}

// bounds parses Min and Max; an open side is nil.
func (p *Param) bounds() (lo, hi any, err error) {
	if p.Min == "" && p.Max == "" {
		return nil, nil, nil
	}
	switch p.Type {
	case ParamInt, ParamFloat, ParamSize, ParamRate, ParamDuration:
	default:
		return nil, nil, fmt.Errorf("a %v parameter cannot have a range", p.Type)
	}
	if p.Min != "" {
		if lo, err = ParseValue(p.Type, p.Min); err != nil {
			return nil, nil, fmt.Errorf("min: %w", err)
		}
	}
	if p.Max != "" {
		if hi, err = ParseValue(p.Type, p.Max); err != nil {
			return nil, nil, fmt.Errorf("max: %w", err)
		}
	}
	if lo != nil && hi != nil && compare(lo, hi) > 0 {
		return nil, nil, fmt.Errorf("min %s is above max %s", p.Min, p.Max)
	}
	return lo, hi, nil
}

func (p *Param) checkRange(v any) error {
	lo, hi, err := p.bounds()
	if err != nil || (lo == nil && hi == nil) {
		return err
	}
	below, above := lo != nil && compare(v, lo) < 0, hi != nil && compare(v, hi) > 0
	if !below && !above {
		return nil
	}
	got := FormatValue(p.Type, v)
	switch {
	case lo != nil && hi != nil:
		return fmt.Errorf("must be in [%s, %s], got %s", p.Min, p.Max, got)
	case below:
		return fmt.Errorf("must be at least %s, got %s", p.Min, got)
	}
	return fmt.Errorf("must be at most %s, got %s", p.Max, got)
}

// compare orders two values of one numeric parameter type.
func compare(a, b any) int {
	switch x := a.(type) {
	case int64:
		return cmp.Compare(x, b.(int64))
	case float64:
		return cmp.Compare(x, b.(float64))
	case time.Duration:
		return cmp.Compare(x, b.(time.Duration))
	}
	panic(fmt.Sprintf("core: compare %T", a))
}

// Params are decoded parameter values for one component block. Defaults are
// filled in for parameters that were not set.
type Params struct {
	schema []Param
	vals   map[string]any
	set    map[string]bool
}

// NewParams returns the defaults of schema. It fails on a malformed
// schema: a default or a bound that does not parse, or a default outside
// its own range.
func NewParams(schema []Param) (Params, error) {
	p := Params{schema: schema, vals: map[string]any{}, set: map[string]bool{}}
	for i := range schema {
		d := &schema[i]
		if _, _, err := d.bounds(); err != nil {
			return Params{}, fmt.Errorf("range of %s: %w", d.Name, err)
		}
		if d.Type == ParamBlock {
			p.vals[d.Name] = []Params(nil)
			continue
		}
		if d.Default == "" && d.Type != ParamString {
			continue
		}
		v, err := ParseValue(d.Type, d.Default)
		if err != nil {
			return Params{}, fmt.Errorf("default of %s: %w", d.Name, err)
		}
		if err := d.checkRange(v); err != nil {
			return Params{}, fmt.Errorf("default of %s: %w", d.Name, err)
		}
		p.vals[d.Name] = v
	}
	return p, nil
}

// MustParams is NewParams for schemas whose defaults are known to parse.
func MustParams(schema []Param) Params {
	p, err := NewParams(schema)
	if err != nil {
		panic("core: " + err.Error())
	}
	return p
}

// Schema is the schema the values were decoded against.
func (p Params) Schema() []Param { return p.schema }

// Param returns the declaration of name.
func (p Params) Param(name string) (*Param, bool) {
	for i := range p.schema {
		if p.schema[i].Name == name {
			return &p.schema[i], true
		}
	}
	return nil, false
}

// Set stores v (of the accessor's Go type) for name and marks it set.
func (p Params) Set(name string, v any) error {
	d, ok := p.Param(name)
	if !ok {
		return fmt.Errorf("unknown parameter %q", name)
	}
	if err := d.CheckValue(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	p.vals[name] = v
	p.set[name] = true
	return nil
}

// SetText parses s according to name's type and stores it.
func (p Params) SetText(name, s string) error {
	d, ok := p.Param(name)
	if !ok {
		return fmt.Errorf("unknown parameter %q", name)
	}
	v, err := ParseValue(d.Type, s)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return p.Set(name, v)
}

// IsSet reports whether name was set explicitly rather than defaulted.
func (p Params) IsSet(name string) bool { return p.set[name] }

// Has reports whether name has a value, set or default.
func (p Params) Has(name string) bool { _, ok := p.vals[name]; return ok }

// Names lists the parameters that have values, sorted.
func (p Params) Names() []string {
	names := make([]string, 0, len(p.vals))
	for n := range p.vals {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Value returns the raw value of name.
func (p Params) Value(name string) (any, bool) { v, ok := p.vals[name]; return v, ok }

func get[T any](p Params, name string) T {
	v, ok := p.vals[name]
	if !ok {
		if _, declared := p.Param(name); !declared {
			panic(fmt.Sprintf("core: parameter %q is not in the schema", name))
		}
		var zero T
		return zero
	}
	t, ok := v.(T)
	if !ok {
		panic(fmt.Sprintf("core: parameter %q holds %T, not %T", name, v, t))
	}
	return t
}

// String returns a ParamString value.
func (p Params) String(name string) string { return get[string](p, name) }

// Int returns a ParamInt value.
func (p Params) Int(name string) int { return int(get[int64](p, name)) }

// Float returns a ParamFloat value.
func (p Params) Float(name string) float64 { return get[float64](p, name) }

// Bool returns a ParamBool value.
func (p Params) Bool(name string) bool { return get[bool](p, name) }

// Size returns a ParamSize value in bytes.
func (p Params) Size(name string) int64 { return get[int64](p, name) }

// Rate returns a ParamRate value in bytes per second.
func (p Params) Rate(name string) float64 { return get[float64](p, name) }

// Duration returns a ParamDuration value.
func (p Params) Duration(name string) time.Duration { return get[time.Duration](p, name) }

// Strings returns a ParamStrings value.
func (p Params) Strings(name string) []string { return get[[]string](p, name) }

// Map returns a ParamMap value.
func (p Params) Map(name string) map[string]string { return get[map[string]string](p, name) }

// Blocks returns the nested blocks of a ParamBlock parameter.
func (p Params) Blocks(name string) []Params { return get[[]Params](p, name) }

// FormatValue renders a value in the textual form ParseValue accepts.
func FormatValue(t ParamType, v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []string:
		return strings.Join(x, ",")
	case time.Duration:
		return x.String()
	case float64:
		if t == ParamRate {
			return FormatRate(x)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64:
		if t == ParamSize {
			return FormatSize(x)
		}
		return strconv.FormatInt(x, 10)
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			keys[i] = k + "=" + x[k]
		}
		return strings.Join(keys, ",")
	case []Params:
		return fmt.Sprintf("%d block(s)", len(x))
	}
	return fmt.Sprint(v)
}
