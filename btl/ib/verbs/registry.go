package verbs

import (
	"fmt"
	"sort"
	"sync"
)

// ProviderFactory opens a provider for a scope. A scope names one
// process's view of the fabric: a software provider keeps a separate set of
// devices per scope, so that several ranks living in one process (tests,
// in-process jobs) each have their own HCAs, as separate hosts would. A
// hardware provider ignores it.
type ProviderFactory func(scope string) (Provider, error)

var providers = struct {
	sync.Mutex
	m map[string]ProviderFactory
}{m: map[string]ProviderFactory{}}

// RegisterProvider makes a provider available by name. Providers register
// from init; a duplicate name panics.
func RegisterProvider(name string, f ProviderFactory) {
	providers.Lock()
	defer providers.Unlock()
	if _, dup := providers.m[name]; dup {
		panic("verbs: provider " + name + " registered twice")
	}
	providers.m[name] = f
}

// OpenProvider returns the named provider for scope.
func OpenProvider(name, scope string) (Provider, error) {
	providers.Lock()
	f := providers.m[name]
	providers.Unlock()
	if f == nil {
		return nil, fmt.Errorf("verbs: no provider %q (compiled in: %v)", name, ProviderNames())
	}
	return f(scope)
}

// ProviderNames lists the registered providers.
func ProviderNames() []string {
	providers.Lock()
	defer providers.Unlock()
	var out []string
	for n := range providers.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
