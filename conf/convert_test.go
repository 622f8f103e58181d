package conf

import (
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/gobtl/gobtl/core"
)

// convertCases are, for every parameter type, values it takes (with the
// Go value core.Params holds) and values it refuses (with the message).
var convertCases = []struct {
	name string
	t    core.ParamType
	v    cty.Value
	want any
	err  string
}{
	{"a string is a string", core.ParamString, cty.StringVal("x"), "x", ""},
	{"a number converts to a string", core.ParamString, cty.NumberIntVal(12), "12", ""},
	{"a list is no string", core.ParamString, cty.ListValEmpty(cty.String), nil, "want a string, got list of string."},
	{"an integer", core.ParamInt, cty.NumberIntVal(-3), int64(-3), ""},
	{"a numeric string is an integer", core.ParamInt, cty.StringVal("7"), int64(7), ""},
	{"a fraction is no integer", core.ParamInt, cty.NumberFloatVal(1.5), nil, "want an integer, got 1.5."},
	{"a huge number is no integer", core.ParamInt, cty.NumberVal(new(big.Float).SetFloat64(1e30)), nil, "want an integer, got 1e+30."},
	{"units are no integer", core.ParamInt, cty.StringVal("12KiB"), nil, `want an integer, got "12KiB".`},
	{"a float", core.ParamFloat, cty.NumberFloatVal(0.25), 0.25, ""},
	{"a bool is no float", core.ParamFloat, cty.True, nil, "want a number, got bool."},
	{"an infinite float", core.ParamFloat, cty.NumberVal(new(big.Float).SetMantExp(big.NewFloat(1), 2000)), nil, "1.14813e+602 is out of range."},
	{"a bool", core.ParamBool, cty.True, true, ""},
	{"a string bool", core.ParamBool, cty.StringVal("false"), false, ""},
	{"yes is no bool", core.ParamBool, cty.StringVal("yes"), nil, `want true or false, got "yes".`},
	{"a size in bytes", core.ParamSize, cty.NumberIntVal(4096), int64(4096), ""},
	{"a size with units", core.ParamSize, cty.StringVal("12KiB"), int64(12 << 10), ""},
	{"a negative size", core.ParamSize, cty.NumberIntVal(-1), nil, "want a whole, non-negative number of bytes, got -1."},
	{"a fractional size", core.ParamSize, cty.NumberFloatVal(0.5), nil, "want a whole, non-negative number of bytes, got 0.5."},
	{"a bool is no size", core.ParamSize, cty.True, nil, `want a size like 4096 or "12KiB", got bool.`},
	{"a rate in bytes per second", core.ParamRate, cty.NumberIntVal(1000), 1000.0, ""},
	{"a rate with units", core.ParamRate, cty.StringVal("1GB/s"), 1e9, ""},
	{"a negative rate", core.ParamRate, cty.NumberIntVal(-5), nil, "want a non-negative rate, got -5."},
	{"a bool is no rate", core.ParamRate, cty.False, nil, `want a rate like "1GB/s", got bool.`},
	{"a zero duration", core.ParamDuration, cty.NumberIntVal(0), time.Duration(0), ""},
	{"a duration with units", core.ParamDuration, cty.StringVal("500us"), 500 * time.Microsecond, ""},
	{"a duration without units", core.ParamDuration, cty.NumberIntVal(5), nil, `a duration needs a unit: write "5ms" or "5us", say.`},
	{"a list of strings", core.ParamStrings, cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NumberIntVal(2)}), []string{"a", "2"}, ""},
	{"a set of strings", core.ParamStrings, cty.SetVal([]cty.Value{cty.StringVal("a")}), []string{"a"}, ""},
	{"a string is no list", core.ParamStrings, cty.StringVal("a"), nil, `want a list of strings like ["a", "b"], got string.`},
	{"a null in a list", core.ParamStrings, cty.ListVal([]cty.Value{cty.StringVal("a"), cty.NullVal(cty.String)}), nil, "element 1 of the list is null."},
	{"a list of lists", core.ParamStrings, cty.TupleVal([]cty.Value{cty.ListValEmpty(cty.String)}), nil, "want a list of strings: element 0: string required, but have list of string."},
	{"a map", core.ParamMap, cty.ObjectVal(map[string]cty.Value{"pml": cty.StringVal("debug"), "n": cty.NumberIntVal(1)}), map[string]string{"pml": "debug", "n": "1"}, ""},
	{"a list is no map", core.ParamMap, cty.ListValEmpty(cty.String), nil, `want a map like { key = "value" }, got list of string.`},
	{"a null in a map", core.ParamMap, cty.MapVal(map[string]cty.Value{"k": cty.NullVal(cty.String)}), nil, `the value of "k" is null.`},
	{"a map of lists", core.ParamMap, cty.ObjectVal(map[string]cty.Value{"k": cty.ListValEmpty(cty.String)}), nil, `want a map of strings: element "k": string required, but have list of string.`},
	{"a block is set by a block", core.ParamBlock, cty.StringVal("x"), nil, "parameters of type block cannot be set by an attribute."},
}

func TestEveryParameterTypeConvertsWhatItTakesAndNamesWhatItRefuses(t *testing.T) {
	for _, c := range convertCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := convertValue(c.v, c.t)
			switch {
			case c.err != "" && (err == nil || err.Error() != c.err):
				t.Fatalf("got %v, %v; want the error %q", got, err, c.err)
			case c.err == "" && (err != nil || !reflect.DeepEqual(got, c.want)):
				t.Fatalf("got %#v, %v; want %#v", got, err, c.want)
			}
		})
	}
}
