package plugins

import (
	"fmt"
	"path/filepath"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// BlockOf is the Block of a policy block loaded by conf. A plugin body
// that conf could not decode at load time (it had no schema for it) is
// decoded by Open against the running plugin's own schema, with cfg's
// variables, and its diagnostics point into the stack file.
func BlockOf(cfg *conf.Config, p *conf.Policy) Block {
	b := Block{
		Kind:      p.Kind,
		Path:      p.Path,
		SHA256:    p.SHA256,
		PluginDir: p.PluginDir,
		OnFailure: string(p.OnFailure),
		Params:    p.Params,
	}
	if p.Plugin {
		b.Plugin = p.Name
	} else {
		b.Builtin = p.Name
	}
	if r := p.DeclRange; r.Filename != "" {
		b.Pos = fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
		b.Dir = filepath.Dir(r.Filename)
	}
	if p.Plugin && !p.Checked && cfg != nil {
		b.Decode = func(schema []core.Param) (core.Params, error) {
			if err := conf.Err(cfg.DecodePolicy(p, schema)); err != nil {
				return core.Params{}, err
			}
			return p.Params, nil
		}
	}
	return b
}
