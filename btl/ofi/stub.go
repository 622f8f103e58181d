//go:build !ofi || !cgo

package ofi

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// Available reports whether this build has libfabric: false without the
// ofi build tag.
const Available = false

// open fails: the component is registered so that a stack naming it
// says how to get it, not that it does not exist.
func open(env core.BTLEnv) ([]core.Module, error) {
	return nil, fmt.Errorf("btl %q %q: %w", Name, env.Instance, ErrNotBuilt)
}

// checkProvider and checkDomain accept anything: without libfabric there
// is nothing to check against, and Open says why it cannot run.
func checkProvider(any) error { return nil }
func checkDomain(any) error   { return nil }

// Providers lists what libfabric offers; without it, nothing.
func Providers(provider string) ([]ProviderInfo, error) { return nil, ErrNotBuilt }

// netProviders lists nothing: there is no libfabric to ask.
func netProviders() ([]ProviderInfo, error) { return nil, ErrNotBuilt }
