package ofi_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtl/gobtl/btl/ofi"
)

// rdm is a reliable-datagram pairing as fi_getinfo lists it.
func rdm(provider, domain string) ofi.ProviderInfo {
	return ofi.ProviderInfo{Provider: provider, Domain: domain, EPType: "FI_EP_RDM"}
}

// The default stack's transport between nodes is btl "ofi" exactly when
// libfabric has a provider with hardware behind it, and says why.
func TestTheDefaultNetworkIsOFIOnlyWhereAProviderHasHardware(t *testing.T) {
	here := []ofi.ProviderInfo{rdm("tcp;ofi_rxm", "eth0"), rdm("tcp;ofi_rxm", "lo"), rdm("sockets", "eth0"), rdm("shm", "shm")}
	mlx := map[string]bool{"mlx5_0": true, "mlx5_1": true}
	for _, c := range []struct {
		name  string
		found []ofi.ProviderInfo
		err   error
		rdma  map[string]bool
		want  string
	}{
		{"only user-space providers", here, nil, nil,
			"softrc (no fabric provider with hardware: found tcp, sockets, shm)"},
		{"verbs on an HCA", append([]ofi.ProviderInfo{rdm("verbs;ofi_rxm", "mlx5_0")}, here...), nil, mlx,
			"ofi (provider verbs, domain mlx5_0)"},
		{"verbs listed after tcp", append(here, rdm("verbs;ofi_rxm", "mlx5_1")), nil, mlx,
			"ofi (provider verbs, domain mlx5_1)"},
		{"verbs on soft RoCE", append(here, rdm("verbs;ofi_rxm", "rxe0")), nil, map[string]bool{"rxe0": false},
			"softrc (no fabric provider with hardware: found tcp, sockets, shm, verbs (verbs on rxe0, no RDMA hardware))"},
		{"verbs with no device at all", append(here, rdm("verbs;ofi_rxm", "mlx5_0")), nil, nil,
			"softrc (no fabric provider with hardware: found tcp, sockets, shm, verbs (verbs on mlx5_0, no RDMA hardware))"},
		{"verbs' datagram domain of an HCA", append(here, rdm("verbs;ofi_rxd", "mlx5_0-dgram")), nil, mlx,
			"ofi (provider verbs, domain mlx5_0-dgram)"},
		{"verbs' message endpoint only", append(here, ofi.ProviderInfo{Provider: "verbs", Domain: "mlx5_0", EPType: "FI_EP_MSG"}), nil, mlx,
			"softrc (no fabric provider with hardware: found tcp, sockets, shm, verbs)"},
		{"efa before the verbs view of the same card", append(here, rdm("verbs;ofi_rxm", "rdmap0s31"), rdm("efa", "rdmap0s31-rdm")), nil,
			map[string]bool{"rdmap0s31": true}, "ofi (provider efa, domain rdmap0s31-rdm)"},
		{"Slingshot", append(here, rdm("cxi", "cxi0")), nil, nil, "ofi (provider cxi, domain cxi0)"},
		{"Omni-Path", append(here, rdm("opx", "hfi1_0")), nil, nil, "ofi (provider opx, domain hfi1_0)"},
		{"psm3 over an E810", append(here, rdm("psm3", "irdma0")), nil, map[string]bool{"irdma0": true},
			"ofi (provider psm3, domain irdma0)"},
		{"psm3 over sockets", append(here, rdm("psm3", "eth0")), nil, nil,
			"softrc (no fabric provider with hardware: found tcp, sockets, shm, psm3 (psm3 on eth0, no RDMA hardware))"},
		{"no provider at all", nil, nil, nil, "softrc (libfabric finds no provider)"},
		{"a build without libfabric", nil, fmt.Errorf("x: %w", ofi.ErrNotBuilt), nil,
			"softrc (this gobtl was built without libfabric (build tag ofi))"},
		{"fi_getinfo failing", nil, errors.New("fi_getinfo: -61"), nil,
			"softrc (libfabric lists no provider: fi_getinfo: -61)"},
	} {
		if got := ofi.ChooseNet(c.found, c.err, c.rdma).String(); got != c.want {
			t.Errorf("%s: chose %q, want %q", c.name, got, c.want)
		}
	}
}

// This host's choice agrees with the build: without libfabric, softrc,
// saying so; with it, whatever ChooseNet makes of the host (no fabric
// hardware on the test machines, and never a provider without a domain).
func TestThisHostsDefaultNetworkSaysWhy(t *testing.T) {
	n := ofi.DefaultNet()
	t.Logf("net: %s", n)
	if !ofi.Available && (n.OFI() || n.Why != "this gobtl was built without libfabric (build tag ofi)") {
		t.Fatalf("without libfabric the default network is %s", n)
	}
	if n.OFI() && n.Domain == "" || !n.OFI() && n.Why == "" {
		t.Fatalf("default network %+v", n)
	}
}

// RDMADevices tells hardware from the kernel's software devices by where
// sysfs keeps them.
func TestRDMADevicesTellHardwareFromSoftware(t *testing.T) {
	dir := t.TempDir()
	for name, target := range map[string]string{
		"mlx5_0": "devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0",
		"rxe0":   "devices/virtual/infiniband/rxe0",
	} {
		if err := os.MkdirAll(filepath.Join(dir, target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "class"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", target), filepath.Join(dir, "class", name)); err != nil {
			t.Fatal(err)
		}
	}
	got := ofi.RDMADevices(filepath.Join(dir, "class"))
	if len(got) != 2 || !got["mlx5_0"] || got["rxe0"] {
		t.Fatalf("devices %v, want mlx5_0 hardware and rxe0 software", got)
	}
	if got := ofi.RDMADevices(filepath.Join(dir, "none")); len(got) != 0 {
		t.Fatalf("a host without RDMA devices lists %v", got)
	}
}
