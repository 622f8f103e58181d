package conf

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/gobtl/gobtl/core"
)

// defaultHCL is the default stack. It is the one place the default
// transports are written down: a configuration without btl blocks takes
// its btl blocks, `gobtl config show` with no file prints it, and
// examples/default.hcl documents every default in the same text.
//
//go:embed examples/default.hcl
var defaultHCL []byte

// DefaultStackName is the file name the default stack's diagnostics and
// `config show` give it.
const DefaultStackName = "<default stack>"

// DefaultStack returns the default stack as a source: what a job that
// names no stack file runs.
func DefaultStack() Source { return Source{Name: DefaultStackName, Bytes: defaultHCL} }

// addDefaultBTLs gives a configuration that names no btl block the
// default stack's, the way an MCA parameter changes only what it names:
// a file that sets the protocol or a policy keeps the default transports.
// A default whose component is not compiled in is left out.
func (c *Config) addDefaultBTLs() {
	f, diags := hclparse.NewParser().ParseHCL(defaultHCL, DefaultStackName)
	if diags.HasErrors() {
		panic("conf: the embedded default stack does not parse: " + diags.Error())
	}
	content, _, _ := f.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "btl", LabelNames: []string{"kind", "name"}}}})
	var blocks []*hcl.Block
	for _, b := range content.Blocks {
		if _, ok := core.Lookup(core.KindBTL, b.Labels[0]); ok {
			blocks = append(blocks, b)
		}
	}
	if ds := c.decodeBTLs(blocks); ds.HasErrors() {
		panic("conf: the embedded default stack does not load: " + ds.Error())
	}
	c.DefaultBTLs = true
}

// CheckReach warns when no transport of the stack reaches another
// process: every rank of a job started by `gobtl run`, mpirun or srun
// would fail its first message to a peer with "peer unreachable". A BTL
// that does not declare its reach is given the benefit of the doubt. It
// is advice for `gobtl config check`, not part of Load: a stack for
// gobtl.RunLocal's goroutine ranks is right to have only btl "inproc".
func (c *Config) CheckReach() hcl.Diagnostics {
	if len(c.BTLs) == 0 || c.DefaultBTLs {
		return nil
	}
	var names []string
	for _, b := range c.BTLs {
		r := b.Component.Reach
		if r == core.ReachUnknown || r >= core.ReachHost {
			return nil
		}
		names = append(names, fmt.Sprintf("btl %q reaches %s", b.Kind, r))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var network []string
	for _, comp := range core.Components(core.KindBTL) {
		if comp.Reach >= core.ReachHost {
			network = append(network, comp.Name)
		}
	}
	return hcl.Diagnostics{warningAt(c.BTLs[0].DeclRange, "No transport reaches another process",
		fmt.Sprintf("The stack's transports reach no other process (%s), so the ranks of a job of processes fail their first "+
			"message to a peer with \"peer unreachable\". Add a transport between processes (%s), or leave out every "+
			"btl block to keep the default stack's.", strings.Join(names, "; "), quoteList(network)))}
}
