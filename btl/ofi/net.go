package ofi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hardwareProviders are the providers that drive a NIC, in the order the
// default stack prefers them when a host has several: a vendor's own
// provider before the generic one for the same card (psm3 and verbs both
// drive an Intel E810; efa devices also show up as verbs devices).
var hardwareProviders = []string{"cxi", "efa", "opx", "psm2", "psm3", "verbs"}

// onVerbsDevice are the hardware providers that can run without a card
// of their own (verbs over rxe or siw, psm3 over its sockets layer): they
// count only on a domain that is an RDMA device with hardware behind it.
var onVerbsDevice = []string{"psm3", "verbs"}

// Net is the default stack's transport between nodes, as ChooseNet picks
// it: btl "ofi" on Provider's Domain, or (Provider empty) btl "ib" over
// softrc; Why says what was found.
type Net struct {
	Provider, Domain string
	Why              string
}

// OFI reports whether the default stack runs btl "ofi" between nodes.
func (n Net) OFI() bool { return n.Provider != "" }

// String is what `gobtl config show` prints after "net: ", e.g. "ofi
// (provider verbs, domain mlx5_0)" or "softrc (no fabric provider with
// hardware: found tcp, sockets, shm)".
func (n Net) String() string {
	if n.OFI() {
		return fmt.Sprintf("ofi (provider %s, domain %s)", n.Provider, n.Domain)
	}
	return "softrc (" + n.Why + ")"
}

// ChooseNet decides what the default stack runs between nodes: btl "ofi"
// when libfabric finds a provider with hardware behind it (found, the
// reliable-datagram pairings fi_getinfo returns for what a module needs;
// listErr, why there is no list), softrc otherwise. rdma are the host's
// RDMA devices by name (/sys/class/infiniband), true for those with
// hardware behind them: a verbs or psm3 domain counts only when it is
// one. It is the one place the choice is made; DefaultNet feeds it this
// host.
func ChooseNet(found []ProviderInfo, listErr error, rdma map[string]bool) Net {
	switch {
	case errors.Is(listErr, ErrNotBuilt):
		return Net{Why: "this gobtl was built without libfabric (build tag ofi)"}
	case listErr != nil:
		return Net{Why: fmt.Sprintf("libfabric lists no provider: %v", listErr)}
	}
	var names, soft []string
	for _, name := range hardwareProviders {
		for _, p := range found {
			if coreProvider(p.Provider) != name || (p.EPType != "" && p.EPType != "FI_EP_RDM") {
				continue
			}
			if slices.Contains(onVerbsDevice, name) && !rdma[deviceOf(p.Domain)] {
				soft = append(soft, fmt.Sprintf("%s on %s, no RDMA hardware", name, p.Domain))
				continue
			}
			return Net{Provider: name, Domain: p.Domain, Why: fmt.Sprintf("libfabric's %s provider has domain %s", name, p.Domain)}
		}
	}
	for _, p := range found {
		names = append(names, coreProvider(p.Provider))
	}
	names = uniq(names)
	why := "no fabric provider with hardware: found " + strings.Join(names, ", ")
	if len(names) == 0 {
		why = "libfabric finds no provider"
	}
	if soft = uniq(soft); len(soft) > 0 {
		why += " (" + strings.Join(soft, "; ") + ")"
	}
	return Net{Why: why}
}

// uniq drops repeats, keeping the first of each.
func uniq(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// DefaultNet is ChooseNet on this host: what fi_getinfo offers a module
// (netProviders) and the RDMA devices of /sys/class/infiniband.
func DefaultNet() Net {
	found, err := netProviders()
	return ChooseNet(found, err, RDMADevices("/sys/class/infiniband"))
}

// coreProvider is the provider under a utility provider: "verbs" of
// "verbs;ofi_rxm".
func coreProvider(p string) string {
	name, _, _ := strings.Cut(p, ";")
	return name
}

// deviceOf is the RDMA device a verbs domain is on: "mlx5_0" of
// "mlx5_0-xrc" or "mlx5_0-dgram".
func deviceOf(domain string) string {
	for _, s := range []string{"-xrc", "-dgram"} {
		if d, ok := strings.CutSuffix(domain, s); ok {
			return d
		}
	}
	return domain
}

// RDMADevices lists the RDMA devices under dir (/sys/class/infiniband):
// true for those with hardware behind them, false for software ones (rxe,
// siw), which the kernel keeps under /sys/devices/virtual.
func RDMADevices(dir string) map[string]bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, e := range ents {
		target, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
		out[e.Name()] = err == nil && !strings.Contains(target, "/virtual/")
	}
	return out
}
