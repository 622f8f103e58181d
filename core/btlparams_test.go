package core

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSharedBTLParamsReadBackIntoAttrs(t *testing.T) {
	schema := []Param{
		BTLParam("eager_limit", "4KiB"),
		BTLParam("max_send_size", "32KiB").WithRange("1KiB", "").WithDoc("the fragment size"),
		BTLParam("latency", "2us"),
		BTLParam("exclusivity", "50"),
		{Name: "own", Type: ParamInt, Default: "3"},
	}
	if d := schema[1].Doc; !strings.HasSuffix(d, "; the fragment size") || schema[1].Min != "1KiB" {
		t.Errorf("max_send_size declared as %+v", schema[1])
	}
	p := MustParams(schema)
	a, err := BTLAttrs(p)
	if err != nil {
		t.Fatal(err)
	}
	want := Attrs{EagerLimit: 4096, MaxSendSize: 32 << 10, Latency: 2 * time.Microsecond, Exclusivity: 50}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("BTLAttrs = %+v, want %+v", a, want)
	}
	if err := p.SetText("eager_limit", "64KiB"); err != nil {
		t.Fatal(err)
	}
	if _, err := BTLAttrs(p); err == nil || !strings.Contains(err.Error(), "eager_limit 64KiB exceeds max_send_size 32KiB") {
		t.Fatalf("an eager limit above max_send_size: %v", err)
	}
}

func TestOnlySharedParamsAreDeclaredThroughBTLParam(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("BTLParam of a name no BTL shares did not panic")
		}
	}()
	BTLParam("fastbox_size", "64KiB")
}
