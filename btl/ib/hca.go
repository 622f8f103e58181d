package ib

import (
	"fmt"
	"sync"

	"github.com/gobtl/gobtl/btl/ib/softrc"
	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// hca is an opened device shared by every module on it in this process
// (several ports, several paths per port): one context, one protection
// domain and one registration cache, so that a memory key issued through
// any of its modules is valid on all of them.
type hca struct {
	key  string
	dev  verbs.Device
	pd   verbs.PD
	attr verbs.DeviceAttr
	reg  *regCache
	refs int
	soft *softrc.Device // nil for hardware providers
	// rejected is the device's count of rejected links when a module last
	// looked: the first rejection is logged (at warn), once per device.
	rejected int64

	mu   sync.Mutex
	mods []*module // open modules, which share the device's async events
}

func (h *hca) attach(m *module) {
	h.mu.Lock()
	h.mods = append(h.mods, m)
	h.mu.Unlock()
}

func (h *hca) detach(m *module) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.mods {
		if x == m {
			h.mods = append(h.mods[:i], h.mods[i+1:]...)
			return
		}
	}
}

var hcas = struct {
	sync.Mutex
	m map[string]*hca
}{m: map[string]*hca{}}

// softrcPorts is how many ports a softrc device has; ports start lazily.
const softrcPorts = 8

// openHCA opens (or shares) the device a block names, configuring a softrc
// port first.
func openHCA(c *config, boot core.Bootstrap, jobKey *core.JobKey, spans bool) (*hca, error) {
	scope := ""
	if c.provider == "softrc" || c.provider == "sim" {
		// Each rank is its own host, even when several share a process.
		scope = fmt.Sprintf("%s/%d", boot.JobID(), boot.Rank())
	}
	key := c.provider + "|" + scope + "|" + c.device
	hcas.Lock()
	defer hcas.Unlock()
	if c.provider == "softrc" {
		sp := softrc.Scope(scope)
		if int(c.port) > softrcPorts {
			return nil, fmt.Errorf("ib: softrc devices have %d ports, not %d", softrcPorts, c.port)
		}
		if err := sp.Configure(c.device, softrc.DeviceConfig{Ports: softrcPorts, IdleAfter: c.idleAfter, PinNIC: c.pinNIC, NICCPU: nicCPU(c.nicCPU, boot), Key: jobKey}); err != nil {
			return nil, fmt.Errorf("ib: %w (idle_after, nic_thread and nic_cpu must agree across blocks on one device)", err)
		}
		addr, err := c.softrcAddress(spans)
		if err != nil {
			return nil, err
		}
		if err := sp.ConfigurePort(c.device, c.port, softrc.PortConfig{Addr: addr, Rate: c.rate, Delay: c.delay, Link: linkName(c.link, boot.Rank())}); err != nil {
			return nil, fmt.Errorf("ib: %w", err)
		}
	}
	if h := hcas.m[key]; h != nil {
		h.refs++
		return h, nil
	}
	prov, err := verbs.OpenProvider(c.provider, scope)
	if err != nil {
		return nil, fmt.Errorf("ib: %w", err)
	}
	name := c.device
	if name == "" {
		devs, err := prov.Devices()
		if err != nil {
			return nil, fmt.Errorf("ib: %s: list devices: %w", c.provider, err)
		}
		if len(devs) == 0 {
			return nil, fmt.Errorf("ib: %s: no InfiniBand devices", c.provider)
		}
		name = devs[0].Name
	}
	dev, err := prov.Open(name)
	if err != nil {
		return nil, fmt.Errorf("ib: open %s device %s: %w", c.provider, name, err)
	}
	attr, err := dev.Query()
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("ib: query %s: %w", name, err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("ib: %s: alloc PD: %w", name, err)
	}
	h := &hca{key: key, dev: dev, pd: pd, attr: attr, refs: 1}
	h.soft, _ = dev.(*softrc.Device)
	h.reg = newRegCache(pd, c.regCache)
	hcas.m[key] = h
	return h, nil
}

// noteRejected records the device's count of rejected links and reports
// whether it is the first the modules see, to be logged.
func (h *hca) noteRejected(n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.rejected == 0
	h.rejected = n
	return first
}

func (h *hca) release() {
	hcas.Lock()
	defer hcas.Unlock()
	h.refs--
	if h.refs > 0 {
		return
	}
	delete(hcas.m, h.key)
	h.reg.close()
	h.pd.Dealloc()
	h.dev.Close()
}

// siblings are the open modules on this module's device.
func (m *module) siblings() []*module {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	return append([]*module(nil), m.h.mods...)
}

// nicCPU is the CPU a pinned NIC thread takes (nic_cpu): the one the
// stack names, else the CPU of the process's counted from the last by
// the rank's index among its node's ranks, so that ranks that share CPUs
// — unbound, as the overlap experiment runs them — pin their NICs to
// different ones rather than all to the last.
func nicCPU(want int, boot core.Bootstrap) int {
	if want >= 0 {
		return want
	}
	l := core.LocalityOf(boot)
	if l == nil {
		// Unknown: every rank on one node, as gobtl run starts them.
		return -1 - boot.Rank()
	}
	for i, r := range core.LocalRanks(l, boot.Size(), boot.Rank()) {
		if r == boot.Rank() {
			return -1 - i
		}
	}
	return -1
}
