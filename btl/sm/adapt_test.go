package sm

import (
	"reflect"
	"testing"

	"github.com/gobtl/gobtl/core"
)

// choose_mechanism leaves to the receiver only what the table allows by
// CMA: without mechanism blocks a message alone above 64 KiB; with
// blocks, every rule with a single_copy_depth of 0 and up, never one of
// -1; an oversubscribed node keeps its fixed tables; off, nothing changes.
func TestChooseMechanismOnlyWhereTheTableAllowsCMA(t *testing.T) {
	c, err := smConfig(t, "choose_mechanism = true")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.attrs.Mech, chooseMech) || !c.mechDefault {
		t.Fatalf("no blocks: table %+v (default %v), want %+v", c.attrs.Mech, c.mechDefault, chooseMech)
	}
	if err := c.attrs.Mech.Validate(c.attrs.MaxSendSize); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size     int64
		inflight int
		offer    bool
	}{{16 << 10, 0, false}, {64 << 10, 0, false}, {64<<10 + 1, 0, true}, {1 << 20, 0, true}, {1 << 20, 1, false}, {64 << 20, 0, true}} {
		r := c.attrs.Mech.Lookup(tc.size)
		if got := r.UseRDMA(tc.inflight) && r.Choose; got != tc.offer {
			t.Errorf("%s with %d in flight: offered to the receiver %v, want %v", core.FormatSize(tc.size), tc.inflight, got, tc.offer)
		}
	}
	if got, x := nodeMech(c.attrs.Mech, c.mechDefault, 16, 2); !reflect.DeepEqual(got, oversubscribedMech) || !reflect.DeepEqual(x, oversubscribedExchangeMech) {
		t.Fatalf("oversubscribed: %+v and %+v, want the fixed tables", got, x)
	}

	c, err = smConfig(t, `choose_mechanism = true
mechanism {
  max = "64KiB"
  single_copy_depth = -1
}
mechanism {
  single_copy_depth = 2
}`)
	if err != nil {
		t.Fatal(err)
	}
	want := core.MechTable{{Max: 64 << 10, RDMADepth: core.NoRDMA}, {RDMADepth: 2, Choose: true}}
	if !reflect.DeepEqual(c.attrs.Mech, want) {
		t.Fatalf("blocks: table %+v, want %+v", c.attrs.Mech, want)
	}

	c, err = smConfig(t, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.attrs.Mech {
		if r.Choose {
			t.Fatalf("choose_mechanism off: table %+v leaves a choice", c.attrs.Mech)
		}
	}
}
