//go:build !pmix || !cgo

package pmix_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/boot/pmix"
)

func TestWithoutTheTagAPMIxRankIsToldHowToBuild(t *testing.T) {
	t.Setenv(pmix.EnvNamespace, "ns42")
	t.Setenv(pmix.EnvRank, "0")
	_, err := pmix.FromEnv(context.Background())
	if !errors.Is(err, pmix.ErrNotBuilt) {
		t.Fatalf("FromEnv: %v", err)
	}
	for _, want := range []string{"-tags pmix", "make", "ns42"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if pmix.Available {
		t.Error("a build without the tag says PMIx is available")
	}
}
