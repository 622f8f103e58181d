package core

import "strings"

// Caps names the capability sets a module and its endpoints offer beyond
// messaging, which every module offers. They are derived from the
// interfaces implemented (CapsOf) — the interfaces are the one source of
// truth, as libfabric's op tables are there or not — for display and for
// the conformance suite; the PML asserts the interfaces themselves.
type Caps uint8

const (
	// CapRDMA: the endpoint implements RDMA and its module Registrar.
	CapRDMA Caps = 1 << iota
	// CapEager: the endpoint implements Eager.
	CapEager
	// CapResources: the endpoint implements Resources.
	CapResources
	// CapNotify: the module implements Notifier.
	CapNotify
	// CapAttach: the module implements Attacher.
	CapAttach
)

// CapsOf returns the sets module m offers, with ep one of its endpoints
// (nil: the module's own sets only). RDMA counts only whole: an RDMA
// endpoint of a module without a Registrar is not the set (the PML does
// not use it, and the conformance suite fails it).
func CapsOf(m Module, ep Endpoint) Caps {
	var c Caps
	_, reg := m.(Registrar)
	if _, ok := ep.(RDMA); ok && reg {
		c |= CapRDMA
	}
	if _, ok := ep.(Eager); ok {
		c |= CapEager
	}
	if _, ok := ep.(Resources); ok {
		c |= CapResources
	}
	if _, ok := m.(Notifier); ok {
		c |= CapNotify
	}
	if _, ok := m.(Attacher); ok {
		c |= CapAttach
	}
	return c
}

// Has reports whether all sets of want are in c.
func (c Caps) Has(want Caps) bool { return c&want == want }

// String lists the sets, messaging ("send") first: "send,rdma,notify".
func (c Caps) String() string {
	names := []string{"rdma", "eager", "resources", "notify", "attach"}
	s := []string{"send"}
	for i, n := range names {
		if c&(1<<i) != 0 {
			s = append(s, n)
		}
	}
	return strings.Join(s, ",")
}
