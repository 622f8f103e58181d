//go:build !ofi || !cgo

package ofi_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/btl/ofi"
	"github.com/gobtl/gobtl/conf"
)

// TestWithoutTheTagAStackNamingOFISaysHowToRebuild: a gobtl built
// without libfabric knows the component, and a job whose stack names it
// fails at open with the way to rebuild.
func TestWithoutTheTagAStackNamingOFISaysHowToRebuild(t *testing.T) {
	cfg, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "stack.hcl", Bytes: []byte(`
btl "ofi" "net" { provider = "tcp" }
`)})
	if diags.HasErrors() {
		t.Fatal(conf.Err(diags))
	}
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{Config: cfg}, func(c *gobtl.Comm) error { return nil })
	if !errors.Is(err, ofi.ErrNotBuilt) || !strings.Contains(err.Error(), "make ofi-dev") || !strings.Contains(err.Error(), "-tags ofi") {
		t.Fatalf("a job over ofi without libfabric: %v", err)
	}
	if _, err := ofi.Providers(""); !errors.Is(err, ofi.ErrNotBuilt) {
		t.Fatalf("Providers without libfabric: %v", err)
	}
}
