package sm

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// smConfig loads body as the btl "sm" block of a stack file and builds
// sm's configuration from it, as Open does.
func smConfig(t *testing.T, body string) (config, error) {
	t.Helper()
	src := conf.Source{Name: "s.hcl", Bytes: []byte("btl \"sm\" \"sm\" {\n" + body + "\n}\n")}
	c, diags := conf.LoadSources(conf.Options{LookupEnv: func(string) (string, bool) { return "", false }}, src)
	if diags.HasErrors() {
		return config{}, diags
	}
	return configFrom(c.BTLs[0].Params)
}

// The default table sends messages up to 512 KiB through the copy
// pipeline, alone or not, and reads every larger one by CMA from both
// ends, whatever is in flight (mechanism.go).
func TestTheDefaultTablePipelinesUpTo512KiBAndSplitsTheCopyAbove(t *testing.T) {
	c, err := smConfig(t, "")
	if err != nil {
		t.Fatal(err)
	}
	mech := c.attrs.Mech
	if err := mech.Validate(c.attrs.MaxSendSize); err != nil {
		t.Fatalf("the default table is invalid: %v", err)
	}
	for _, tc := range []struct {
		size     int64
		inflight int
		cma      bool
	}{
		{8 << 10, 0, false},
		{16 << 10, 0, false},
		{16<<10 + 1, 0, false},
		{64 << 10, 0, false},
		{64 << 10, 63, false},
		{256 << 10, 0, false},
		{512 << 10, 0, false},
		{512<<10 + 1, 0, true},
		{1 << 20, 0, true},
		{1 << 20, 63, true},
		{4 << 20, 0, true},
		{4 << 20, 63, true},
		{64 << 20, 0, true},
	} {
		rule := mech.Lookup(tc.size)
		if rule == nil {
			t.Fatalf("no rule for %d bytes", tc.size)
		}
		if got := rule.UseRDMA(tc.inflight); got != tc.cma {
			t.Errorf("%s with %d other rendezvous in flight: CMA %v, want %v", core.FormatSize(tc.size), tc.inflight, got, tc.cma)
		}
	}
}

func TestMechanismBlocksBuildTheTable(t *testing.T) {
	c, err := smConfig(t, `
  max_send_size = "64KiB"
  mechanism {
    max               = "32KiB"
    single_copy_depth = -1
    fragment          = "8KiB"
  }
  mechanism {
    max               = "1MiB"
    single_copy_depth = 2
    depth             = 16
  }
  mechanism {
    single_copy_depth = 0
    fragment          = "64KiB"
    depth             = 8
  }`)
	if err != nil {
		t.Fatal(err)
	}
	want := core.MechTable{
		{Max: 32 << 10, RDMADepth: core.NoRDMA, Frag: 8 << 10},
		{Max: 1 << 20, RDMADepth: 2, Depth: 16},
		{RDMADepth: 0, Frag: 64 << 10, Depth: 8},
	}
	if !reflect.DeepEqual(c.attrs.Mech, want) {
		t.Fatalf("table %+v, want %+v", c.attrs.Mech, want)
	}
}

// The window of single_copy_min/max still works as it did (CMA in the
// window whatever is in flight): no table, Attrs.RDMAMin/RDMAMax.
func TestTheSingleCopyWindowStillLoads(t *testing.T) {
	c, err := smConfig(t, `single_copy_min = "32KiB"
  single_copy_max = "256KiB"`)
	if err != nil {
		t.Fatal(err)
	}
	if c.attrs.Mech != nil || c.attrs.RDMAMin != 32<<10 || c.attrs.RDMAMax != 256<<10 {
		t.Fatalf("attrs %+v, want the window 32KiB-256KiB and no table", c.attrs)
	}
}

func TestBadMechanismBlocksAreRefusedClearly(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"last rule bounded", `mechanism {
    max = "64KiB"
  }`, `s.hcl:2,1-10: Invalid mechanism block; mechanism: rule 1: the last rule must cover every larger size (max 0), not stop at 64KiB`},
		{"open rule not last", `mechanism {
  }
  mechanism {
    max = "64KiB"
  }`, `s.hcl:2,1-10: Invalid mechanism block; mechanism: rule 1: only the last rule may have no max (rule 2 follows)`},
		{"out of order", `mechanism {
    max = "64KiB"
  }
  mechanism {
    max = "32KiB"
  }
  mechanism {
  }`, `mechanism: rule 2: max 32KiB does not exceed the previous rule's 64KiB (rules go by increasing max)`},
		{"depth below -1", `mechanism {
    single_copy_depth = -2
  }`, `s.hcl:3,25-27: Invalid value for "single_copy_depth"; Must be in [-1, 65536], got -2.`},
		{"negative pipeline depth", `mechanism {
    depth = -1
  }`, `Invalid value for "depth"; Must be in [0, 65536], got -1.`},
		{"fragment above max_send_size", `mechanism {
    fragment = "128KiB"
  }`, `sm: mechanism: rule 1: fragment 128KiB exceeds max_send_size 64KiB`},
		{"a typo", `mechanism {
    single_copy_dpeth = 1
  }`, `Did you mean "single_copy_depth"?`},
		{"both the window and a table", `single_copy_max = "256KiB"
  mechanism {
  }`, `sm: single_copy_min/single_copy_max and mechanism blocks both given`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := smConfig(t, tc.body)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// What `gobtl config show` prints — every default spelled out, the window
// at zero beside the table — loads back to the same table, and without
// blocks to the default table, not to the window.
func TestAWindowAtZeroIsNoWindow(t *testing.T) {
	c, err := smConfig(t, `single_copy_min = "0B"
  single_copy_max = "0B"`)
	if err != nil || !reflect.DeepEqual(c.attrs.Mech, defaultMech) || !c.mechDefault {
		t.Fatalf("table %+v, default %v (%v), want the default", c.attrs.Mech, c.mechDefault, err)
	}
	c, err = smConfig(t, `single_copy_min = "0B"
  single_copy_max = "0B"
  mechanism {
    single_copy_depth = 3
  }`)
	if err != nil || !reflect.DeepEqual(c.attrs.Mech, core.MechTable{{RDMADepth: 3}}) || c.mechDefault {
		t.Fatalf("table %+v, default %v (%v), want the block's, which an oversubscribed node keeps", c.attrs.Mech, c.mechDefault, err)
	}
}

// On a node with more ranks than CPUs the default table gives way to CMA
// at every size above 16 KiB, whatever is in flight: the copy pipeline
// needs both processes running at once — except for an exchange's
// messages up to 512 KiB, where both run anyway. A stack's own table is
// kept, for exchanges too.
func TestAnOversubscribedNodeReadsByCMA(t *testing.T) {
	got, x := nodeMech(defaultMech, true, 16, 2)
	if !reflect.DeepEqual(got, oversubscribedMech) || !reflect.DeepEqual(x, oversubscribedExchangeMech) {
		t.Fatalf("16 ranks on 2 CPUs: %v and %v, want %v and %v", got, x, oversubscribedMech, oversubscribedExchangeMech)
	}
	if got, x := nodeMech(defaultMech, true, 2, 2); !reflect.DeepEqual(got, defaultMech) || x != nil {
		t.Fatalf("2 ranks on 2 CPUs: %v and %v, want the default %v for both", got, x, defaultMech)
	}
	own := core.MechTable{{RDMADepth: core.NoRDMA}}
	if got, x := nodeMech(own, false, 16, 2); !reflect.DeepEqual(got, own) || x != nil {
		t.Fatalf("a stack's own table was replaced: %v and %v", got, x)
	}
	if !oversubscribedMech.Lookup(1 << 20).UseRDMA(64) {
		t.Fatal("oversubscribed: 1 MiB with 64 in flight does not go by CMA")
	}
	for _, c := range []struct {
		size int64
		cma  bool
	}{{16 << 10, false}, {512 << 10, false}, {512<<10 + 1, true}, {1 << 20, true}} {
		if got := oversubscribedExchangeMech.Lookup(c.size).UseRDMA(0); got != c.cma {
			t.Errorf("oversubscribed exchange of %d bytes: CMA %v, want %v", c.size, got, c.cma)
		}
	}
	if err := oversubscribedExchangeMech.Validate(64 << 10); err != nil {
		t.Fatal(err)
	}
}

// The pipeline's default fragment is 64 KiB (mechanism.go: half the
// frames per MiB of 32 KiB ones, and half the instructions besides the
// copies), and the segment holds 32 of them, the 2 MiB it held before.
func TestDefaultFragmentsHold64KiB(t *testing.T) {
	c, err := smConfig(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.attrs.MaxSendSize != 64<<10 || c.frags != 32 {
		t.Fatalf("max_send_size %d, fragments %d; want 64 KiB and 32", c.attrs.MaxSendSize, c.frags)
	}
	lay := newLayout(2, c.fboxSize, c.frags, core.HeaderSize+c.attrs.MaxSendSize)
	if frags := lay.coopOff - lay.fragOff; frags > 2<<20+32*256 {
		t.Fatalf("the fragments take %d bytes of the segment, want about 2 MiB", frags)
	}
}

// conf/examples/sm.hcl spells out sm's defaults, and what its comments
// say of them: its table is the default table, and the sender helps a
// CMA read.
func TestTheExampleStackSpellsOutTheDefaults(t *testing.T) {
	b, err := os.ReadFile("../../conf/examples/sm.hcl")
	if err != nil {
		t.Fatal(err)
	}
	// Only the sm block: this test binary has no other BTL compiled in.
	i := bytes.Index(b, []byte("\nbtl \"sm\" \""))
	j := bytes.Index(b[max(i, 0):], []byte("\n}\n"))
	if i < 0 || j < 0 {
		t.Fatal("sm.hcl has no btl \"sm\" block")
	}
	c, diags := conf.LoadSources(conf.Options{LookupEnv: func(string) (string, bool) { return "", false }}, conf.Source{Name: "sm.hcl", Bytes: b[i : i+j+3]})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, bl := range c.BTLs {
		if bl.Kind != "sm" {
			continue
		}
		cfg, err := configFrom(bl.Params)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cfg.attrs.Mech, defaultMech) || !cfg.helper {
			t.Fatalf("sm.hcl: table %v, helper %v; the defaults are %v, true", cfg.attrs.Mech, cfg.helper, defaultMech)
		}
		return
	}
	t.Fatal("sm.hcl has no btl \"sm\" block")
}
