package core

import (
	"strings"
	"testing"
	"time"
)

func TestParseUnits(t *testing.T) {
	sizes := map[string]int64{"4096": 4096, "12KiB": 12288, "12KB": 12000, "1.5MiB": 1572864, "64k": 65536, "2 GiB": 2 << 30, "0": 0}
	for in, want := range sizes {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "KiB", "12XB", "1.5B", "-3", "1e3"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) succeeded", bad)
		}
	}
	rates := map[string]float64{"1GB/s": 1e9, "250MB/s": 250e6, "1GiB/s": 1 << 30}
	for in, want := range rates {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	if _, err := ParseRate("1GB"); err == nil {
		t.Error("ParseRate without /s succeeded")
	}
	if d, err := ParseDuration("500us"); err != nil || d != 500*time.Microsecond {
		t.Errorf("ParseDuration: %v %v", d, err)
	}
	if FormatSize(12288) != "12KiB" || FormatSize(1000) != "1000B" {
		t.Errorf("FormatSize: %s %s", FormatSize(12288), FormatSize(1000))
	}
}

func TestParamsDefaultsAndAccessors(t *testing.T) {
	schema := []Param{
		{Name: "eager_limit", Type: ParamSize, Default: "4KiB"},
		{Name: "mode", Type: ParamString, Default: "a", Enum: []string{"a", "b"}},
		{Name: "rate", Type: ParamRate, Default: "1GB/s"},
		{Name: "wait", Type: ParamDuration, Default: "1ms"},
		{Name: "n", Type: ParamInt},
		{Name: "q", Type: ParamBlock, Repeat: true, Block: []Param{{Name: "size", Type: ParamSize}}},
	}
	p, err := NewParams(schema)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size("eager_limit") != 4096 || p.String("mode") != "a" || p.Rate("rate") != 1e9 || p.Duration("wait") != time.Millisecond {
		t.Fatalf("defaults wrong: %v", p.vals)
	}
	if p.Has("n") || p.Int("n") != 0 {
		t.Fatal("a parameter without default has a value")
	}
	if err := p.SetText("mode", "c"); err == nil {
		t.Fatal("enum violation accepted")
	}
	if err := p.SetText("n", "12"); err != nil || p.Int("n") != 12 || !p.IsSet("n") {
		t.Fatalf("SetText: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("asking for an undeclared parameter did not panic")
		}
	}()
	p.Int("nope")
}

func TestRegistryRejectsDuplicates(t *testing.T) {
	c := &Component{Kind: KindSched, Name: "test-dup", NewPolicy: func(Params) (any, error) { return nil, nil }}
	Register(c)
	if got, ok := Lookup(KindSched, "test-dup"); !ok || got != c {
		t.Fatal("lookup failed")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate registration did not panic")
		}
	}()
	Register(c)
}

func TestParamMapRoundTrips(t *testing.T) {
	v, err := ParseValue(ParamMap, "pml=debug, btl.sm = info")
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]string)
	if len(m) != 2 || m["pml"] != "debug" || m["btl.sm"] != "info" {
		t.Fatalf("ParseValue(ParamMap) = %v", m)
	}
	if got := FormatValue(ParamMap, m); got != "btl.sm=info,pml=debug" {
		t.Fatalf("FormatValue(ParamMap) = %q", got)
	}
	if _, err := ParseValue(ParamMap, "pml"); err == nil {
		t.Fatal("a map without '=' parsed")
	}
	p := MustParams([]Param{{Name: "levels", Type: ParamMap, Default: "pml=warn"}})
	if p.Map("levels")["pml"] != "warn" {
		t.Fatalf("Map default: %v", p.Map("levels"))
	}
}

func TestRangesAreCheckedWhereverAValueComesFrom(t *testing.T) {
	schema := []Param{
		{Name: "frags", Type: ParamInt, Default: "64", Min: "2", Max: "65536"},
		{Name: "box", Type: ParamSize, Default: "64KiB", Min: "1KiB"},
		{Name: "alpha", Type: ParamFloat, Default: "0.5", Min: "0", Max: "1"},
		{Name: "wait", Type: ParamDuration, Default: "1ms", Max: "1s"},
	}
	p, err := NewParams(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, value, want string }{
		{"frags", "1", "must be in [2, 65536], got 1"},
		{"frags", "65537", "must be in [2, 65536], got 65537"},
		{"box", "512B", "must be at least 1KiB, got 512B"},
		{"alpha", "1.5", "must be in [0, 1], got 1.5"},
		{"wait", "2s", "must be at most 1s, got 2s"},
	} {
		if err := p.SetText(c.name, c.value); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %s: %v, want %q", c.name, c.value, err, c.want)
		}
	}
	for _, c := range []struct{ name, value string }{{"frags", "2"}, {"frags", "65536"}, {"box", "1KiB"}, {"alpha", "0"}, {"wait", "1s"}} {
		if err := p.SetText(c.name, c.value); err != nil {
			t.Errorf("%s = %s (a bound itself): %v", c.name, c.value, err)
		}
	}
	if got := schema[0].Range(); got != "[2, 65536]" {
		t.Errorf("Range() = %q", got)
	}
	if got := schema[1].Range(); got != ">= 1KiB" {
		t.Errorf("Range() = %q", got)
	}
}

func TestAMalformedRangeIsASchemaError(t *testing.T) {
	for _, bad := range []Param{
		{Name: "a", Type: ParamInt, Default: "1", Min: "2"},          // default below its range
		{Name: "b", Type: ParamInt, Min: "5", Max: "4"},              // empty range
		{Name: "c", Type: ParamSize, Min: "lots"},                    // bound does not parse
		{Name: "d", Type: ParamString, Default: "x", Min: "1"},       // not a number
		{Name: "e", Type: ParamDuration, Default: "1s", Max: "10ms"}, // default above
	} {
		if _, err := NewParams([]Param{bad}); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
}
