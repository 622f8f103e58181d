// Package netif chooses the IP address a network BTL listens on and
// publishes to its peers, the way Open MPI's btl_tcp_if_include and
// btl_tcp_if_exclude do: by interface name or by subnet. A BTL declares
// the two parameters in its block (Params) and calls Select when it
// opens.
//
// The address must be one the other ranks can reach. On one node the
// loopback address serves every pair; a job that spans nodes must never
// publish it, so there, with nothing configured, the first address of
// the first interface that is up and not loopback is taken, and an
// explicit choice that resolves to loopback is an error rather than a
// job whose ranks cannot connect.
//
// It also keeps a network BTL's TCP sockets between two processes of one
// host unpaced (pacing.go: NoPacing says why), for the sockets a BTL
// opens itself (Unpace) and for those a library opens for it
// (UnpaceSockets).
package netif

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/gobtl/gobtl/core"
)

// Parameter names, the same in every network BTL's block.
const (
	ParamInclude = "if_include"
	ParamExclude = "if_exclude"
)

// Params declares if_include and if_exclude for a BTL's schema.
func Params() []core.Param {
	return []core.Param{
		{Name: ParamInclude, Type: core.ParamString, Default: "",
			Doc: `interfaces and subnets to take the published address from, in order of preference: "veth0,10.0.0.0/24" (as btl_tcp_if_include); unset: loopback on one node, else the first up, non-loopback interface`},
		{Name: ParamExclude, Type: core.ParamString, Default: "",
			Doc: `interfaces and subnets never to take the address from, e.g. "docker0,192.168.0.0/16" (as btl_tcp_if_exclude); not together with if_include`},
	}
}

// Iface is one network interface as Select sees it.
type Iface struct {
	Name     string
	Up       bool
	Loopback bool
	Addrs    []*net.IPNet
}

// Interfaces lists the host's interfaces in the kernel's order.
func Interfaces() ([]Iface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("netif: %w", err)
	}
	out := make([]Iface, 0, len(ifs))
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			return nil, fmt.Errorf("netif: %s: %w", i.Name, err)
		}
		x := Iface{Name: i.Name, Up: i.Flags&net.FlagUp != 0, Loopback: i.Flags&net.FlagLoopback != 0}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				x.Addrs = append(x.Addrs, n)
			}
		}
		out = append(out, x)
	}
	return out, nil
}

// Choice is what a BTL knows when it picks its address.
type Choice struct {
	// Include and Exclude are the if_include and if_exclude parameters:
	// comma-separated interface names and CIDR subnets.
	Include, Exclude string
	// Spans says the job runs on more than one node
	// (core.SpansNodes(env.Locality)).
	Spans bool
	// Interfaces lists the candidates; nil: the host's (Interfaces).
	Interfaces []Iface
}

// ErrNoAddress reports that no interface offers an address the choice
// allows.
var ErrNoAddress = errors.New("no usable address")

// Select returns the address to listen on and publish.
func Select(c Choice) (net.IP, error) {
	if c.Include != "" && c.Exclude != "" {
		return nil, fmt.Errorf("netif: %s and %s are exclusive; set one", ParamInclude, ParamExclude)
	}
	if c.Include == "" && c.Exclude == "" && !c.Spans {
		return net.IPv4(127, 0, 0, 1), nil
	}
	ifs := c.Interfaces
	if ifs == nil {
		var err error
		if ifs, err = Interfaces(); err != nil {
			return nil, err
		}
	}
	if c.Include != "" {
		ms, err := parse(c.Include)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if ip := first(ifs, func(i Iface, n *net.IPNet) bool { return m.match(i, n) }); ip != nil {
				return checkSpan(ip, c.Spans, fmt.Sprintf("%s %q", ParamInclude, m.s))
			}
		}
		return nil, fmt.Errorf("netif: no interface that is up matches %s %q: %w", ParamInclude, c.Include, ErrNoAddress)
	}
	var ex []matcher
	if c.Exclude != "" {
		var err error
		if ex, err = parse(c.Exclude); err != nil {
			return nil, err
		}
	}
	ip := first(ifs, func(i Iface, n *net.IPNet) bool {
		for _, m := range ex {
			if m.match(i, n) {
				return false
			}
		}
		// Loopback only when it is what the user left and it can serve.
		return !i.Loopback || !c.Spans
	})
	if ip == nil {
		why := "the job spans nodes and no interface but loopback is up"
		if c.Exclude != "" {
			why = fmt.Sprintf("every interface that is up is loopback or excluded by %s %q", ParamExclude, c.Exclude)
		}
		return nil, fmt.Errorf("netif: %s: %w", why, ErrNoAddress)
	}
	return ip, nil
}

// Check resolves an address a BTL was given outright (an IP, an interface
// name or a host name) and refuses loopback in a job across nodes.
func Check(addr string, spans bool) (net.IP, error) {
	ip, err := Resolve(addr)
	if err != nil {
		return nil, err
	}
	return checkSpan(ip, spans, fmt.Sprintf("%q", addr))
}

func checkSpan(ip net.IP, spans bool, what string) (net.IP, error) {
	if ip.IsUnspecified() {
		return nil, fmt.Errorf("netif: %s gives %s, which listens everywhere but tells peers nothing: name one address", what, ip)
	}
	if spans && ip.IsLoopback() {
		return nil, fmt.Errorf("netif: %s gives %s, a loopback address, and the job spans nodes: the other nodes could not reach it", what, ip)
	}
	return ip, nil
}

// first returns the first address, in interface order, that ok accepts
// among the interfaces that are up: an IPv4 one if any qualifies, else a
// global IPv6 one.
func first(ifs []Iface, ok func(Iface, *net.IPNet) bool) net.IP {
	var v6 net.IP
	for _, i := range ifs {
		if !i.Up {
			continue
		}
		for _, n := range i.Addrs {
			if !ok(i, n) {
				continue
			}
			if v4 := n.IP.To4(); v4 != nil {
				return v4
			}
			if v6 == nil && !n.IP.IsLinkLocalUnicast() {
				v6 = n.IP
			}
		}
	}
	return v6
}

// matcher is one entry of an if_include or if_exclude list.
type matcher struct {
	s   string
	net *net.IPNet // nil: an interface name
}

func (m matcher) match(i Iface, n *net.IPNet) bool {
	if m.net == nil {
		return i.Name == m.s
	}
	return m.net.Contains(n.IP)
}

func parse(list string) ([]matcher, error) {
	var out []matcher
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		m := matcher{s: f}
		if strings.Contains(f, "/") {
			_, n, err := net.ParseCIDR(f)
			if err != nil {
				return nil, fmt.Errorf("netif: %q is neither an interface name nor a subnet in CIDR notation", f)
			}
			m.net = n
		} else if net.ParseIP(f) != nil {
			return nil, fmt.Errorf("netif: %q is an address; give its subnet, e.g. %s/32", f, f)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("netif: %q names no interface or subnet", list)
	}
	return out, nil
}

// Resolve turns an address as a user writes it — an IP, an interface
// name or a host name — into an IP: an interface's first IPv4 address,
// else its first global IPv6 one; a host name's first IPv4 address. Empty
// is loopback.
func Resolve(s string) (net.IP, error) {
	if s == "" {
		return net.IPv4(127, 0, 0, 1), nil
	}
	if ip := net.ParseIP(s); ip != nil {
		return ip, nil
	}
	if ifc, err := net.InterfaceByName(s); err == nil {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", s, err)
		}
		var nets []*net.IPNet
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				nets = append(nets, n)
			}
		}
		if ip := first([]Iface{{Name: s, Up: true, Addrs: nets}}, func(Iface, *net.IPNet) bool { return true }); ip != nil {
			return ip, nil
		}
		return nil, fmt.Errorf("interface %s has no usable IP address", s)
	}
	ips, err := net.LookupIP(s)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("address %q is neither an IP, an interface nor a resolvable host", s)
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip, nil
		}
	}
	return ips[0], nil
}
