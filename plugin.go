package gobtl

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/plugins"
)

// openPlugin starts an out-of-process policy through the plugin host. If
// the plugin fails later, the host switches the policy to its built-in
// fallback and logs it; with on_failure = "abort" the job stops instead:
// the rank logs the error, naming the policy block, stops its plugins and
// exits with status 1, as MPI_Abort ends a job.
func openPlugin(ctx context.Context, cfg *conf.Config, p *conf.Policy, logs *conf.Loggers) (any, io.Closer, error) {
	log := logs.For("plugin")
	pol, err := plugins.Open(ctx, plugins.BlockOf(cfg, p), plugins.Options{
		Log: log,
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
