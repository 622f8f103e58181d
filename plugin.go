package gobtl

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
)

// openPlugin starts an out-of-process policy through the plugin host. If
// the plugin fails later, the host switches the policy to its built-in
// fallback and logs it; with on_failure = "abort" the job stops instead:
// the rank logs the error, naming the policy block, stops its plugins and
// exits with status 1, as MPI_Abort ends a job.
func openPlugin(ctx context.Context, cfg *conf.Config, p *conf.Policy, logs *conf.Loggers, metrics *core.Metrics) (any, io.Closer, error) {
	log := logs.For("plugin")
	pol, err := plugins.Open(ctx, blockOf(cfg, p), plugins.Options{
		Log:     log,
		Metrics: metrics,
		Abort: func(err error) {
			log.Error().Err(err).Msg("job aborted by a failed policy plugin")
			fmt.Fprintf(os.Stderr, "gobtl: %v\n", err)
			plugins.Shutdown()
			os.Exit(1)
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gobtl: %w", err)
	}
	return pol.Impl(), pol, nil
}

// blockOf is the plugin host's view of a policy block. A plugin body that
// conf could not decode at load time (it had no schema for it) is decoded
// by the host against the running plugin's own schema, with cfg's
// variables, and its diagnostics point into the stack file. Relative
// paths are the stack file's.
func blockOf(cfg *conf.Config, p *conf.Policy) plugins.Block {
	b := plugins.Block{
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
