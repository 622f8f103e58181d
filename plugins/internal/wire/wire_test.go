package wire

import (
	"reflect"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	pb "github.com/gobtl/gobtl/plugins/policypb"
)

// fill sets every field of the value v points to, recursively, to a
// non-zero value distinct from its neighbours', so that a conversion that
// drops a field — one added to core later, say — shows in a round trip.
func fill(v reflect.Value, seed *int) {
	*seed++
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), seed)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), seed)
		}
		v.Set(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*seed % 100))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*seed % 100))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*seed) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("s" + string(rune('a'+*seed%26)))
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
}

func filled[T any]() T {
	var t T
	seed := 0
	fill(reflect.ValueOf(&t).Elem(), &seed)
	return t
}

func roundTrip[T any](t *testing.T, name string, conv func(T) T) {
	t.Helper()
	in := filled[T]()
	if out := conv(in); !reflect.DeepEqual(in, out) {
		t.Errorf("%s does not survive the wire:\n in  %+v\n out %+v", name, in, out)
	}
}

func batch[T any]() []T { return []T{filled[T](), filled[T]()} }

func TestEveryFieldSurvivesTheWire(t *testing.T) {
	roundTrip(t, "FlowInfo", func(x core.FlowInfo) core.FlowInfo { return FlowInfoFromPB(FlowInfoToPB(x)) })
	roundTrip(t, "FlowSetup", func(x core.FlowSetup) core.FlowSetup { return FlowSetupFromPB(FlowSetupToPB(x)) })
	roundTrip(t, "RecvInfo", func(x core.RecvInfo) core.RecvInfo { return RecvInfoFromPB(RecvInfoToPB(x)) })
	roundTrip(t, "RecvSetup", func(x core.RecvSetup) core.RecvSetup { return RecvSetupFromPB(RecvSetupToPB(x)) })
	roundTrip(t, "SchedInfo", func(x core.SchedInfo) core.SchedInfo { return SchedInfoFromPB(SchedInfoToPB(x)) })
	roundTrip(t, "SchedSetup", func(x core.SchedSetup) core.SchedSetup { return SchedSetupFromPB(SchedSetupToPB(x)) })

	check := func(name string, in, out any, err error) {
		t.Helper()
		if err != nil || !reflect.DeepEqual(in, out) {
			t.Errorf("%s batch does not survive the wire (%v):\n in  %+v\n out %+v", name, err, in, out)
		}
	}
	fe := batch[core.FlowEvent]()
	var fem pb.FlowEvents
	AppendFlowEvents(&fem, 7, fe)
	got, err := FlowEventsFromPB(&fem, nil)
	check("FlowEvent", fe, got, err)
	fd := batch[core.FlowDecision]()
	var fdm pb.FlowDecisions
	AppendFlowDecisions(&fdm, 7, fd)
	gotd, err := FlowDecisionsFromPB(&fdm, nil)
	check("FlowDecision", fd, gotd, err)

	re := batch[core.RecvEvent]()
	var rem pb.RecvEvents
	AppendRecvEvents(&rem, 7, re)
	gotr, err := RecvEventsFromPB(&rem, nil)
	check("RecvEvent", re, gotr, err)
	rd := batch[core.RecvDecision]()
	var rdm pb.RecvDecisions
	AppendRecvDecisions(&rdm, 7, rd)
	gotrd, err := RecvDecisionsFromPB(&rdm, nil)
	check("RecvDecision", rd, gotrd, err)

	se := batch[core.SchedEvent]()
	var sem pb.SchedEvents
	AppendSchedEvents(&sem, 7, se)
	gots, err := SchedEventsFromPB(&sem, nil)
	check("SchedEvent", se, gots, err)
	sd := batch[core.SchedDecision]()
	var sdm pb.SchedDecisions
	AppendSchedDecisions(&sdm, 7, sd)
	gotsd, err := SchedDecisionsFromPB(&sdm, nil)
	check("SchedDecision", sd, gotsd, err)
}

func TestABatchWithColumnsOfUnequalLengthIsRefused(t *testing.T) {
	m := &pb.FlowEvents{Kind: []uint32{1, 1}, Peer: []int32{0}}
	if _, err := FlowEventsFromPB(m, nil); err == nil {
		t.Fatal("a malformed batch decoded")
	}
}

func TestParamsSurviveTheWire(t *testing.T) {
	inner := []core.Param{{Name: "size", Type: core.ParamSize}, {Name: "count", Type: core.ParamInt, Default: "4"}}
	schema := []core.Param{
		{Name: "s", Type: core.ParamString, Enum: []string{"a", "b"}},
		{Name: "i", Type: core.ParamInt},
		{Name: "f", Type: core.ParamFloat},
		{Name: "b", Type: core.ParamBool},
		{Name: "size", Type: core.ParamSize},
		{Name: "rate", Type: core.ParamRate},
		{Name: "d", Type: core.ParamDuration},
		{Name: "l", Type: core.ParamStrings},
		{Name: "unset", Type: core.ParamInt, Default: "9"},
		{Name: "q", Type: core.ParamBlock, Block: inner, Repeat: true},
	}
	in := core.MustParams(schema)
	for name, v := range map[string]any{"s": "b", "i": int64(-3), "f": 2.5, "b": true, "size": int64(12 << 10),
		"rate": 1e9, "d": 500 * time.Microsecond, "l": []string{"x", "y,z"}} {
		if err := in.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	q := core.MustParams(inner)
	q.Set("size", int64(2048))
	in.Set("q", []core.Params{q})

	// The schema crosses too (as a plugin's ConfigSchema).
	theirs, err := SchemaFromPB(SchemaToPB(schema))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ValuesToPB(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ValuesFromPB(theirs, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s", "i", "f", "b", "size", "rate", "d", "l"} {
		a, _ := in.Value(name)
		b, _ := out.Value(name)
		if !reflect.DeepEqual(a, b) || !out.IsSet(name) {
			t.Errorf("%s: sent %v, got %v (set %v)", name, a, b, out.IsSet(name))
		}
	}
	if out.IsSet("unset") || out.Int("unset") != 9 {
		t.Error("an unset parameter came across as set, or lost its default")
	}
	if bs := out.Blocks("q"); len(bs) != 1 || bs[0].Size("size") != 2048 || bs[0].Int("count") != 4 {
		t.Errorf("nested block: %+v", bs)
	}
	if err := out.Set("s", "c"); err == nil {
		t.Error("the enum was lost on the way")
	}
}

func TestValuesAreCheckedAgainstThePluginsSchema(t *testing.T) {
	schema := []core.Param{{Name: "n", Type: core.ParamInt, Required: true}}
	for name, m := range map[string]*pb.Values{
		"unknown":  {Values: []*pb.Value{{Name: "x", V: &pb.Value_I{I: 1}}}},
		"mistyped": {Values: []*pb.Value{{Name: "n", V: &pb.Value_S{S: "1"}}}},
		"missing":  {},
	} {
		if _, err := ValuesFromPB(schema, m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
