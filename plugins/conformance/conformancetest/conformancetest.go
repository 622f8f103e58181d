// Package conformancetest runs the policy plugin conformance suite
// (package conformance) from go test, so that a third party checks its
// plugin with the same checks `gobtl plugins verify` makes. It is the
// only part of the suite that imports testing: the gobtl command links
// the suite, not this.
package conformancetest

import (
	"context"
	"testing"

	"github.com/gobtl/gobtl/plugins/conformance"
)

// Run runs the suite against the plugin executable at path, one subtest
// per check: a failed check fails its subtest, one that does not apply
// is skipped, and a plugin that cannot be started at all fails t.
func Run(t *testing.T, path string, o conformance.Options) {
	t.Helper()
	r, err := conformance.Verify(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range r.Results {
		t.Run(res.Name, func(t *testing.T) {
			switch {
			case res.Err != nil:
				t.Error(res.Err)
			case res.Skip:
				t.Skip(res.Detail)
			default:
				t.Log(res.Detail)
			}
		})
	}
}
