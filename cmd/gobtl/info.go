package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl/btl/ofi"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"

	// The components compiled into gobtl register themselves from init;
	// the root package's components.go imports them.
	_ "github.com/gobtl/gobtl"
)

func init() { rootCmd.AddCommand(newInfoCmd()) }

func newInfoCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info [KIND [NAME] | NAME]",
		Short: "list the compiled-in components and their parameters (like ompi_info)",
		Long: `List every compiled-in component by kind — BTLs and policies — with its
documentation and its parameters (type, default, documentation), plus the
parameters of the job block and the attributes every policy block takes.

KIND narrows the list to one kind (btl, flow_control, recvbuf, sched, or
job and policy for the framework's own blocks); NAME to one component. A
NAME alone is enough when one kind has a component of that name:
gobtl info sm is gobtl info btl sm.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sections, err := infoSections(args)
			if err != nil {
				return err
			}
			if len(args) > 0 {
				addProviders(sections)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(sections)
			}
			if len(sections) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no %s components are compiled in\n", args[0])
				return nil
			}
			return writeInfo(cmd.OutOrStdout(), sections)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// infoSection is one block type gobtl info describes: the job block, the
// policy framework, or one component.
type infoSection struct {
	Kind   string      `json:"kind"`
	Name   string      `json:"name,omitempty"`
	Block  string      `json:"block"`
	Doc    string      `json:"doc"`
	Params []infoParam `json:"params"`
	// Providers and Libfabric: what libfabric offers here, for btl ofi
	// named on the command line (info_ofi.go).
	Providers []ofi.ProviderInfo `json:"providers,omitempty"`
	Libfabric string             `json:"libfabric,omitempty"`
}

type infoParam struct {
	Name     string      `json:"name"`
	Type     string      `json:"type"`
	Default  string      `json:"default,omitempty"`
	Required bool        `json:"required,omitempty"`
	Repeat   bool        `json:"repeat,omitempty"`
	Enum     []string    `json:"enum,omitempty"`
	Range    string      `json:"range,omitempty"`
	Doc      string      `json:"doc"`
	Block    []infoParam `json:"block,omitempty"`
}

func infoParams(schema []core.Param) []infoParam {
	out := []infoParam{}
	for _, p := range schema {
		ip := infoParam{Name: p.Name, Type: p.Type.String(), Default: p.Default, Required: p.Required,
			Repeat: p.Repeat, Enum: p.Enum, Range: p.Range(), Doc: p.Doc}
		if p.Type == core.ParamBlock {
			ip.Block = infoParams(p.Block)
		}
		out = append(out, ip)
	}
	return out
}

func infoSections(args []string) ([]infoSection, error) {
	all := []infoSection{
		{Kind: "job", Block: "job { ... }", Doc: "The job: rendezvous protocol, limits over every BTL's, progress back-off and logging.",
			Params: infoParams(conf.JobParams)},
		{Kind: "policy", Block: `policy "<kind>" { ... }`, Doc: "Attributes every policy block takes, whatever its kind; the rest of the block is the policy's own.",
			Params: infoParams(conf.PolicyParams)},
	}
	kinds := append([]core.Kind{core.KindBTL}, core.PolicyKinds...)
	for _, k := range core.Kinds() {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		for _, c := range core.Components(k) {
			block := fmt.Sprintf(`btl %q "<name>" { ... }`, c.Name)
			if k != core.KindBTL {
				block = fmt.Sprintf(`policy %q { builtin = %q ... }`, k, c.Name)
			}
			all = append(all, infoSection{Kind: string(k), Name: c.Name, Block: block, Doc: c.Doc, Params: infoParams(c.Params)})
		}
	}
	if len(args) == 0 {
		return all, nil
	}
	names := []string{"job", "policy"}
	for _, k := range kinds {
		names = append(names, string(k))
	}
	if len(args) == 1 && !slices.Contains(names, args[0]) {
		// A component's name alone: its kind, if only one has it.
		var in []string
		for _, k := range kinds {
			if c, ok := core.Lookup(k, args[0]); ok && c.Name == args[0] {
				in = append(in, string(k))
			}
		}
		switch len(in) {
		case 1:
			args = []string{in[0], args[0]}
		case 0:
			var comps []string
			for _, k := range kinds {
				for _, c := range core.Components(k) {
					comps = append(comps, c.Name)
				}
			}
			hint := ""
			if s := conf.Suggest(args[0], append(slices.Clone(names), comps...)); s != "" {
				hint = fmt.Sprintf("; did you mean %q?", s)
			}
			return nil, fmt.Errorf("info: %q is neither a kind (%s) nor a compiled-in component%s", args[0], strings.Join(names, ", "), hint)
		default:
			return nil, fmt.Errorf("info: %q is a component of several kinds (%s): say which, as in gobtl info %s %s", args[0], strings.Join(in, ", "), in[0], args[0])
		}
	}
	out := []infoSection{}
	for _, s := range all {
		if s.Kind == args[0] && (len(args) < 2 || s.Name == args[1]) {
			out = append(out, s)
		}
	}
	switch {
	case !slices.Contains(names, args[0]):
		return nil, fmt.Errorf("unknown kind %q (kinds: %s)", args[0], strings.Join(names, ", "))
	case len(out) == 0 && len(args) == 2:
		have := []string{}
		for _, c := range core.Components(core.Kind(args[0])) {
			have = append(have, c.Name)
		}
		return nil, fmt.Errorf("no %s component named %q is compiled in (compiled in: %s)", args[0], args[1], cmp.Or(strings.Join(have, ", "), "none"))
	}
	return out, nil
}

func writeInfo(w io.Writer, sections []infoSection) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, s := range sections {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		title := s.Kind
		if s.Name != "" {
			title += " " + s.Name
		}
		fmt.Fprintf(tw, "%s: %s\n", title, s.Block)
		if s.Doc != "" {
			fmt.Fprintf(tw, "  %s\n", s.Doc)
		}
		if len(s.Params) == 0 {
			fmt.Fprintf(tw, "  (no parameters)\n")
		} else {
			writeInfoParams(tw, s.Params, "  ")
		}
		writeProviders(tw, s)
	}
	return tw.Flush()
}

func writeInfoParams(w io.Writer, params []infoParam, indent string) {
	for _, p := range params {
		typ := p.Type
		if p.Repeat {
			typ += " (repeated)"
		}
		def := p.Default
		switch {
		case p.Required:
			def = "(required)"
		case p.Type == core.ParamBlock.String():
			def = ""
		case def == "":
			def = "-"
		case p.Type == core.ParamString.String():
			def = fmt.Sprintf("%q", def)
		}
		doc := p.Doc
		if len(p.Enum) > 0 {
			doc += " [" + strings.Join(p.Enum, "|") + "]"
		}
		if p.Range != "" {
			doc += " (" + p.Range + ")"
		}
		fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\n", indent, p.Name, typ, def, doc)
		writeInfoParams(w, p.Block, indent+"  ")
	}
}
