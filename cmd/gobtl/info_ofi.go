package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/gobtl/gobtl/btl/ofi"
)

// addProviders lists, under btl ofi, what libfabric offers on this host
// (as fi_info does): each provider and domain with its endpoint type,
// capabilities and limits — or why there is nothing to list.
func addProviders(sections []infoSection) {
	for i := range sections {
		s := &sections[i]
		if s.Kind != "btl" || s.Name != ofi.Name {
			continue
		}
		ps, err := ofi.Providers("")
		switch {
		case errors.Is(err, ofi.ErrNotBuilt):
			s.Libfabric = err.Error()
		case err != nil:
			s.Libfabric = fmt.Sprintf("fi_getinfo: %v", err)
		case len(ps) == 0:
			s.Libfabric = "libfabric finds no provider on this host"
		default:
			s.Providers = ps
		}
	}
}

func writeProviders(w io.Writer, s infoSection) {
	if s.Libfabric != "" {
		fmt.Fprintf(w, "  libfabric: %s\n", s.Libfabric)
	}
	if len(s.Providers) == 0 {
		return
	}
	fmt.Fprintf(w, "  libfabric providers here (provider = ..., domain = ...):\n")
	fmt.Fprintf(w, "    provider\tdomain\tfabric\tendpoint\tprogress\tinject\tmr_mode\tcaps\n")
	for _, p := range s.Providers {
		mr := p.MRMode
		if mr == "" {
			mr = "-"
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.Provider, p.Domain, p.Fabric, p.EPType,
			p.DataProgress, p.InjectSize, mr, p.Caps)
	}
}
