package gobtl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
	"github.com/gobtl/gobtl/pml"
)

// openPolicy builds a policy through the plugin host, built in or as a
// plugin process — the one path `gobtl config check` runs too
// (CheckPolicy). If a plugin fails later, the host switches the policy to
// its built-in fallback and logs it; with on_failure = "abort" the job
// ends instead, through abort: the rank logs the error, naming the policy
// block, the engine that started the job is asked to end every rank
// (aborter), and every blocking call of its communicator returns an error
// wrapping core.ErrAborted and the plugin's failure, as when another rank
// dies. A library does not exit its host: the program decides what to
// do, and Close stops the plugins.
func openPolicy(ctx context.Context, cfg *conf.Config, p *conf.Policy, logs *conf.Loggers, metrics *core.Metrics, abort func(error)) (*plugins.Policy, error) {
	log := logs.For("plugin")
	pol, err := plugins.Open(ctx, blockOf(cfg, p), plugins.Options{
		Log:     log,
		Metrics: metrics,
		Abort: func(err error) {
			log.Error().Err(err).Msg("job aborted by a failed policy plugin")
			abort(err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("gobtl: %w", policyError(p, err))
	}
	return pol, nil
}

// CheckPolicy builds the policy of block p the way Init does and stops it
// again, and says at file:line:col what failed: a built-in's constructor,
// a plugin located, its pin checked before it runs, its body decoded
// against its own schema and its own checks of the values. It has the
// shape of conf.Options.CheckPolicy, which `gobtl config check` sets to
// it.
func CheckPolicy(cfg *conf.Config, p *conf.Policy) hcl.Diagnostics {
	err := plugins.Check(context.Background(), blockOf(cfg, p), plugins.Options{Log: zerolog.Nop()})
	if err == nil {
		return nil
	}
	var ce *conf.Error
	if errors.As(policyError(p, err), &ce) {
		return ce.Diagnostics
	}
	return hcl.Diagnostics{p.StartError(err)}
}

// policyError turns what went wrong while a policy was built into
// diagnostics at file:line:col where the stack file can say more than
// the plugin host: the body's own diagnostics, or the value the policy
// refused at its attribute.
func policyError(p *conf.Policy, err error) error {
	var ce *conf.Error
	if errors.As(err, &ce) {
		return ce
	}
	var ve *plugins.ConfigError
	if errors.As(err, &ve) {
		return &conf.Error{Diagnostics: hcl.Diagnostics{p.ValueError(ve.Msg)}}
	}
	return err
}

// aborter takes a plugin's abort to the job's abort path. The plugin may
// fail before the communicator exists (while the job starts) or any time
// after; the first failure is kept and reaches the communicator either
// way. on_failure = "abort" ends the whole job, not this rank alone: the
// engine that started it (job, the bootstrap's core.Aborter: `gobtl
// run`, mpirun, srun) is told first, with the plugin's failure — which
// names the policy, the plugin, its block and how it ended — so that
// the launcher blames the plugin and this rank, before this rank's calls
// fail and its program exits for its own reasons.
type aborter struct {
	mu    sync.Mutex
	comm  *pml.Comm
	cause error
	job   core.Aborter // nil: the engine cannot end the job (RunLocal)
}

// abort aborts the job and the communicator with err, or keeps err for
// attach.
func (a *aborter) abort(err error) {
	a.mu.Lock()
	first := a.cause == nil
	if first {
		a.cause = err
	}
	job := a.job
	a.mu.Unlock()
	if first && job != nil {
		job.Abort(1, err.Error())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.comm != nil {
		a.comm.Abort(err)
	}
}

// attach hands the communicator over; it returns the abort error if a
// plugin already failed, so that Init fails with it.
func (a *aborter) attach(c *pml.Comm) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.comm = c
	if a.cause != nil {
		c.Abort(a.cause)
		return fmt.Errorf("gobtl: %w", errors.Join(core.ErrAborted, a.cause))
	}
	return nil
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
		b.Pos = rangeOf(r)
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
