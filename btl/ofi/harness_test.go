//go:build ofi && cgo

package ofi_test

import (
	"testing"

	"github.com/gobtl/gobtl/btl/ofi"
)

// testProviders are the providers that run in user space on loopback:
// net is libfabric 1.17's reliable-datagram endpoint native to TCP, the
// one 1.18 and later call tcp (tcp here runs under ofi_rxm).
var testProviders = []string{"tcp", "sockets", "shm", "net"}

// requireProvider skips the test, saying why, when libfabric lacks prov.
func requireProvider(t *testing.T, prov string) {
	t.Helper()
	ps, err := ofi.Providers(prov)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 {
		t.Skipf("libfabric has no %s provider here (fi_info -p %s)", prov, prov)
	}
}
