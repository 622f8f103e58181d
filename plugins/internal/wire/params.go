package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
	pb "github.com/gobtl/gobtl/plugins/policypb"
)

// SchemaToPB converts a parameter schema. A Param's Check function stays
// on the plugin's side: Configure applies it.
func SchemaToPB(ps []core.Param) []*pb.Param {
	out := make([]*pb.Param, 0, len(ps))
	for _, p := range ps {
		out = append(out, &pb.Param{
			Name: p.Name, Type: uint32(p.Type), Default: p.Default, Doc: p.Doc,
			Enum: append([]string(nil), p.Enum...), Required: p.Required, Min: p.Min, Max: p.Max,
			Block: SchemaToPB(p.Block), Repeat: p.Repeat,
		})
	}
	return out
}

// SchemaFromPB converts a parameter schema received from a plugin and
// checks that its defaults parse, so that a malformed schema is reported
// against the plugin rather than against the user's configuration.
func SchemaFromPB(ms []*pb.Param) ([]core.Param, error) {
	out := make([]core.Param, 0, len(ms))
	for _, m := range ms {
		block, err := SchemaFromPB(m.GetBlock())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.GetName(), err)
		}
		if m.GetName() == "" {
			return nil, errors.New("a parameter has no name")
		}
		out = append(out, core.Param{
			Name: m.GetName(), Type: core.ParamType(m.GetType()), Default: m.GetDefault(), Doc: m.GetDoc(),
			Enum: m.GetEnum(), Required: m.GetRequired(), Min: m.GetMin(), Max: m.GetMax(), Block: block, Repeat: m.GetRepeat(),
		})
	}
	if _, err := core.NewParams(out); err != nil {
		return nil, err
	}
	return out, nil
}

// ValuesToPB converts the parameters set in p (not the defaults, which
// are the plugin's own business).
func ValuesToPB(p core.Params) (*pb.Values, error) {
	m := &pb.Values{}
	for _, name := range p.Names() {
		if !p.IsSet(name) {
			// Nested blocks are "set" when any appear; their values
			// carry their own set marks.
			if d, ok := p.Param(name); !ok || d.Type != core.ParamBlock || len(p.Blocks(name)) == 0 {
				continue
			}
		}
		raw, _ := p.Value(name)
		v := &pb.Value{Name: name}
		switch x := raw.(type) {
		case string:
			v.V = &pb.Value_S{S: x}
		case int64:
			v.V = &pb.Value_I{I: x}
		case float64:
			v.V = &pb.Value_F{F: x}
		case bool:
			v.V = &pb.Value_B{B: x}
		case time.Duration:
			v.V = &pb.Value_DurationNs{DurationNs: int64(x)}
		case []string:
			v.V = &pb.Value_Strings{Strings: &pb.StringList{Items: x}}
		case map[string]string:
			v.V = &pb.Value_Map{Map: &pb.StringMap{Entries: x}}
		case []core.Params:
			bl := &pb.BlockList{}
			for _, b := range x {
				bm, err := ValuesToPB(b)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				bl.Blocks = append(bl.Blocks, bm)
			}
			v.V = &pb.Value_Blocks{Blocks: bl}
		default:
			return nil, fmt.Errorf("%s: cannot send a %T to a plugin", name, raw)
		}
		m.Values = append(m.Values, v)
	}
	return m, nil
}

// ValuesFromPB decodes values against schema, filling in defaults and
// applying each parameter's enum and Check, and fails on unknown or
// missing required parameters.
func ValuesFromPB(schema []core.Param, m *pb.Values) (core.Params, error) {
	p, err := core.NewParams(schema)
	if err != nil {
		return core.Params{}, err
	}
	for _, v := range m.GetValues() {
		d, ok := p.Param(v.GetName())
		if !ok {
			return core.Params{}, fmt.Errorf("unknown parameter %q", v.GetName())
		}
		val, err := valueFromPB(d, v)
		if err != nil {
			return core.Params{}, fmt.Errorf("%s: %w", d.Name, err)
		}
		if err := p.Set(d.Name, val); err != nil {
			return core.Params{}, err
		}
	}
	for _, d := range schema {
		if d.Required && !p.IsSet(d.Name) {
			return core.Params{}, fmt.Errorf("missing required parameter %q", d.Name)
		}
	}
	return p, nil
}

func valueFromPB(d *core.Param, v *pb.Value) (any, error) {
	mismatch := func() (any, error) {
		return nil, fmt.Errorf("a %T does not fit a %v parameter", v.GetV(), d.Type)
	}
	switch x := v.GetV().(type) {
	case *pb.Value_S:
		if d.Type != core.ParamString {
			return mismatch()
		}
		return x.S, nil
	case *pb.Value_I:
		if d.Type != core.ParamInt && d.Type != core.ParamSize {
			return mismatch()
		}
		return x.I, nil
	case *pb.Value_F:
		if d.Type != core.ParamFloat && d.Type != core.ParamRate {
			return mismatch()
		}
		return x.F, nil
	case *pb.Value_B:
		if d.Type != core.ParamBool {
			return mismatch()
		}
		return x.B, nil
	case *pb.Value_DurationNs:
		if d.Type != core.ParamDuration {
			return mismatch()
		}
		return time.Duration(x.DurationNs), nil
	case *pb.Value_Strings:
		if d.Type != core.ParamStrings {
			return mismatch()
		}
		return append([]string{}, x.Strings.GetItems()...), nil
	case *pb.Value_Map:
		m := map[string]string{}
		for k, s := range x.Map.GetEntries() {
			m[k] = s
		}
		return m, nil
	case *pb.Value_Blocks:
		if d.Type != core.ParamBlock {
			return mismatch()
		}
		if !d.Repeat && len(x.Blocks.GetBlocks()) > 1 {
			return nil, fmt.Errorf("block may appear once, got %d", len(x.Blocks.GetBlocks()))
		}
		var bs []core.Params
		for i, bm := range x.Blocks.GetBlocks() {
			b, err := ValuesFromPB(d.Block, bm)
			if err != nil {
				return nil, fmt.Errorf("block %d: %w", i+1, err)
			}
			bs = append(bs, b)
		}
		return bs, nil
	}
	return nil, errors.New("value has no type")
}
