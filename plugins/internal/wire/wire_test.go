package wire

import (
	"errors"
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

// checkCodec sends a filled info, setup and batch of each direction
// across c and back.
func checkCodec[I, S, E, D, IM, RM, EM, DM any](t *testing.T, c Codec[I, S, E, D, IM, RM, EM, DM]) {
	t.Helper()
	name := string(c.Kind)
	roundTrip(t, name+" info", func(x I) I { return c.InfoFromPB(c.InfoToPB(x)) })
	roundTrip(t, name+" setup", func(x S) S {
		s, refusal := c.FromReply(c.Reply(x, nil))
		if refusal != "" {
			t.Errorf("%s setup came back refused: %s", name, refusal)
		}
		return s
	})
	if _, refusal := c.FromReply(c.Reply(filled[S](), errors.New("no"))); refusal != "no" {
		t.Errorf("%s refusal came back as %q", name, refusal)
	}
	batchTrip(t, name+" events", 7, c.PutEvents, c.GetEvents)
	batchTrip(t, name+" decisions", 9, c.PutDecisions, c.GetDecisions)
}

// batchTrip sends a batch numbered n (a sequence number for events, the
// acknowledged one for decisions) through a message of type M and back.
func batchTrip[T, M any](t *testing.T, name string, n uint64, put func(*M, uint64, []T), get func(*M, []T) (uint64, []T, error)) {
	t.Helper()
	in := batch[T]()
	var m M
	put(&m, n, in)
	got, out, err := get(&m, nil)
	if err != nil || got != n || !reflect.DeepEqual(in, out) {
		t.Errorf("%s do not survive the wire (batch %d, %v):\n in  %+v\n out %+v", name, got, err, in, out)
	}
}

func TestEveryFieldSurvivesTheWire(t *testing.T) {
	checkCodec(t, Flow)
	checkCodec(t, Recv)
	checkCodec(t, Sched)
}

func TestABatchWithColumnsOfUnequalLengthIsRefused(t *testing.T) {
	m := &pb.Events{Kind: []uint32{1, 1}, Subject: []int32{0}}
	if _, _, err := Flow.GetEvents(m, nil); err == nil {
		t.Fatal("a malformed batch decoded")
	}
}

func TestParamsSurviveTheWire(t *testing.T) {
	inner := []core.Param{{Name: "size", Type: core.ParamSize}, {Name: "count", Type: core.ParamInt, Default: "4"}}
	schema := []core.Param{
		{Name: "s", Type: core.ParamString, Enum: []string{"a", "b"}},
		{Name: "i", Type: core.ParamInt, Min: "-5", Max: "5"},
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
	if err := out.Set("i", int64(6)); err == nil {
		t.Error("the range was lost on the way")
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
