//go:build ofi && cgo

package ofi

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
	"github.com/gobtl/gobtl/core"
)

// Available reports whether this build has libfabric.
const Available = true

// caps are what a module needs of a provider: tagged messages (the
// receive classes), RMA both ways, and remote CQ data (the session
// token) which every tagged send carries.
const caps = fabric.CapMsg | fabric.CapTagged | fabric.CapRMA | fabric.AccessRead | fabric.AccessWrite |
	fabric.AccessRemRead | fabric.AccessRemWrite | fabric.AccessSend | fabric.AccessRecv

// config is a decoded block.
type config struct {
	provider        string
	domains         []string // asked for; empty: choose
	eagerLimit      int
	rndvEager       int
	maxReads        int
	sendBuffers     int
	regCache        int64
	probe           int64 // ns
	peerTimeout     int64 // ns
	bandwidth       float64
	latency         int64
	exclusivity     int
	instance, label string
}

func parseConfig(env core.BTLEnv) (*config, error) {
	p := env.Params
	c := &config{
		provider: p.String("provider"), eagerLimit: int(p.Size("eager_limit")), rndvEager: int(p.Size("rndv_eager_limit")),
		maxReads: p.Int("max_reads"), sendBuffers: p.Int("send_buffers"), regCache: p.Size("reg_cache_size"),
		probe: int64(p.Duration("probe_interval")), peerTimeout: int64(p.Duration("peer_timeout")),
		bandwidth: p.Rate("bandwidth"), latency: int64(p.Duration("latency")), exclusivity: p.Int("exclusivity"),
		instance: env.Instance,
	}
	if d := p.String("domain"); d != "" {
		if len(p.Strings("if_include")) > 0 {
			return nil, fmt.Errorf("ofi: domain names one domain, if_include a list: set either")
		}
		c.domains = []string{d}
	} else {
		c.domains = p.Strings("if_include")
	}
	if c.provider == "" {
		return nil, fmt.Errorf("ofi: provider is empty")
	}
	if c.eagerLimit < 0 || c.rndvEager < 0 || c.bandwidth <= 0 {
		return nil, fmt.Errorf("ofi: eager_limit, rndv_eager_limit must not be negative and bandwidth must be positive")
	}
	return c, nil
}

// open opens the modules of a btl "ofi" block: one per domain.
func open(env core.BTLEnv) ([]core.Module, error) {
	c, err := parseConfig(env)
	if err != nil {
		return nil, err
	}
	if env.Boot == nil {
		return nil, fmt.Errorf("ofi: no bootstrap")
	}
	if env.RecvBuffers == nil {
		return nil, fmt.Errorf("ofi: no receive-buffer policy: open the component through core's registry, which gives it its default (recvbuf %q)", DefaultRecvBuffers)
	}
	key, err := env.Key()
	if err != nil {
		return nil, fmt.Errorf("ofi: %w", err)
	}
	list, err := fabric.GetInfo(fabric.Hints{Provider: c.provider, Caps: caps, Order: fabric.OrderSAS})
	if err != nil {
		return nil, fmt.Errorf("ofi: provider %q offers no reliable-datagram endpoint with tagged messages and RMA here: %w", c.provider, err)
	}
	defer list.Free()
	infos, err := chooseDomains(list.Infos, c.domains, core.SpansNodes(env.Locality))
	if err != nil {
		return nil, err
	}
	var mods []core.Module
	for i, in := range infos {
		m, err := newModule(env, c, key, in, i)
		if err != nil {
			for _, x := range mods {
				x.Close()
			}
			return nil, err
		}
		if m.notif != nil {
			mods = append(mods, notifyingModule{m})
		} else {
			mods = append(mods, m)
		}
	}
	return mods, nil
}

// chooseDomains picks one Info per domain: those asked for, in order, or
// one the provider offers (loopback when the job is on one node, the
// first other domain when it spans nodes). Of a domain's pairings the
// first with an IPv4 address (or the provider's only one) serves.
func chooseDomains(all []fabric.Info, want []string, spans bool) ([]*fabric.Info, error) {
	byDomain := map[string]*fabric.Info{}
	var order []string
	for i := range all {
		in := &all[i]
		if cur, ok := byDomain[in.Domain]; !ok || (cur.AddrFormat != "FI_SOCKADDR_IN" && in.AddrFormat == "FI_SOCKADDR_IN") {
			if !ok {
				order = append(order, in.Domain)
			}
			byDomain[in.Domain] = in
		}
	}
	if len(want) == 0 {
		pick := order[0]
		for _, d := range order {
			if (d == "lo") != spans {
				pick = d
				break
			}
		}
		want = []string{pick}
	}
	var out []*fabric.Info
	for _, d := range want {
		in, ok := byDomain[d]
		if !ok && strings.Contains(d, "/") {
			in, ok = inSubnet(d, order, byDomain)
		}
		if !ok {
			return nil, fmt.Errorf("ofi: provider %s has no domain %q here (it has %s)", all[0].Provider, d, strings.Join(order, ", "))
		}
		if slices.Contains(out, in) {
			return nil, fmt.Errorf("ofi: domain %q named twice", d)
		}
		out = append(out, in)
	}
	return out, nil
}

// inSubnet finds the domain an if_include entry in CIDR notation names,
// as btl_tcp_if_include takes one: the first whose fabric (an IP
// provider's subnet: tcp's and sockets' "10.0.0.0/24") lies within it.
// It lets one stack name the interface of each host's network whatever
// the interface is called there.
func inSubnet(cidr string, order []string, byDomain map[string]*fabric.Info) (*fabric.Info, bool) {
	_, want, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, false
	}
	wantOnes, _ := want.Mask.Size()
	for _, d := range order {
		_, fab, err := net.ParseCIDR(byDomain[d].Fabric)
		if err != nil {
			continue
		}
		if ones, _ := fab.Mask.Size(); ones >= wantOnes && want.Contains(fab.IP) {
			return byDomain[d], true
		}
	}
	return nil, false
}

// checkProvider refuses, at configuration check, a provider libfabric
// does not have here.
func checkProvider(v any) error {
	s, _ := v.(string)
	if s == "" {
		return fmt.Errorf("empty provider")
	}
	l, err := fabric.GetInfo(fabric.Hints{Provider: s, AnyEPType: true})
	if err != nil {
		return fmt.Errorf("libfabric has no provider %q here (%v); gobtl info ofi lists those it has", s, err)
	}
	l.Free()
	return nil
}

// checkDomain refuses a domain no provider offers here.
func checkDomain(v any) error {
	s, _ := v.(string)
	if s == "" {
		return nil
	}
	l, err := fabric.GetInfo(fabric.Hints{Domain: s, AnyEPType: true})
	if err != nil {
		return fmt.Errorf("no libfabric provider offers a domain %q here; gobtl info ofi lists those there are", s)
	}
	l.Free()
	return nil
}

// Providers lists what libfabric offers here, for gobtl info ofi: every
// provider (or the one named) with its domains, endpoint types and
// capabilities, as fi_info lists them.
func Providers(provider string) ([]ProviderInfo, error) {
	// Asked for none by name, libfabric leaves out providers another one
	// supersedes (sockets): ask for those by name too.
	names := []string{provider}
	if provider == "" {
		names = append(names, "sockets")
	}
	var out []ProviderInfo
	seen := map[ProviderInfo]bool{}
	for _, name := range names {
		ps, err := providers(fabric.Hints{Provider: name, AnyEPType: true})
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// netProviders lists the pairings a module could open (what open asks
// fi_getinfo for), for DefaultNet: sockets by name as well, which tcp
// supersedes when none is named.
func netProviders() ([]ProviderInfo, error) {
	var out []ProviderInfo
	for _, name := range []string{"", "sockets"} {
		ps, err := providers(fabric.Hints{Provider: name, Caps: caps, Order: fabric.OrderSAS})
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

func providers(h fabric.Hints) ([]ProviderInfo, error) {
	l, err := fabric.GetInfo(h)
	if errors.Is(err, fabric.ErrNoData) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer l.Free()
	out := make([]ProviderInfo, 0, len(l.Infos))
	for _, in := range l.Infos {
		out = append(out, ProviderInfo{Provider: in.Provider, Fabric: in.Fabric, Domain: in.Domain, EPType: in.EPType,
			AddrFormat: in.AddrFormat, Caps: in.CapsString, MRMode: in.MRModeString, MsgOrder: in.OrderString,
			InjectSize: in.InjectSize, TxSize: in.TxSize, RxSize: in.RxSize, MaxMsgSize: in.MaxMsgSize,
			DataProgress: in.DataProgress, AuthKeySize: in.AuthKeySize})
	}
	return out, nil
}
