package gobtl

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/ofi"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// chooseNet picks the default stack's transport between nodes on this
// host (btl/ofi's ChooseNet, fed what libfabric and sysfs say); tests
// feed it their own.
var chooseNet = ofi.DefaultNet

// WithDefaultNet fits the default stack's transport between nodes to this
// host, for a configuration that runs the default stack's transports
// (cfg.DefaultBTLs): btl "ofi" on the provider and domain that
// ofi.ChooseNet picks where libfabric has a provider with hardware behind
// it (verbs, efa, cxi, psm3, opx), in place of the default stack's btl
// "ib" over softrc, which stays otherwise. Net says which and why, as
// `gobtl config show` prints it. A configuration that names its own btl
// blocks comes back as it is; cfg itself is never changed.
func WithDefaultNet(cfg *conf.Config) (*conf.Config, error) {
	if !cfg.DefaultBTLs {
		return cfg, nil
	}
	return withNet(cfg, chooseNet())
}

func withNet(cfg *conf.Config, n ofi.Net) (*conf.Config, error) {
	c := *cfg // the ranks of RunLocal may share one Options.Config
	c.Net = n.String()
	if !n.OFI() {
		return &c, nil
	}
	comp, ok := core.Lookup(core.KindBTL, ofi.Name)
	if !ok {
		return nil, fmt.Errorf("gobtl: the default network is %s, and btl %q is not compiled in", n, ofi.Name)
	}
	p := core.MustParams(comp.Params)
	for _, kv := range [][2]string{{"provider", n.Provider}, {"domain", n.Domain}} {
		if err := p.SetText(kv[0], kv[1]); err != nil {
			return nil, fmt.Errorf("gobtl: the default network %s: %w", n, err)
		}
	}
	c.BTLs = nil
	for _, b := range cfg.BTLs {
		if b.Component.Reach == core.ReachNetwork {
			b = &conf.BTL{Kind: ofi.Name, Name: b.Name, Component: comp, Params: p, DeclRange: b.DeclRange}
		}
		c.BTLs = append(c.BTLs, b)
	}
	return &c, nil
}
