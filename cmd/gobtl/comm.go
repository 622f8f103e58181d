package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// openComm starts this rank with gobtl.Init on the stack file given with
// -c (else $GOBTL_CONFIG, else the default stack) and describes the stack
// for the report: its files, protocol and every parameter set in a btl
// block.
func openComm(ctx context.Context, stack string) (*gobtl.Comm, map[string]any, error) {
	var files []string
	switch {
	case stack != "":
		files = strings.Split(stack, ",")
	case os.Getenv(gobtl.EnvConfig) != "":
		files = strings.Split(os.Getenv(gobtl.EnvConfig), ",")
	}
	desc := map[string]any{"stack": "default"}
	opts := gobtl.Options{}
	if len(files) > 0 {
		cfg, diags := conf.Load(conf.Options{}, files...)
		if diags.HasErrors() {
			return nil, nil, fmt.Errorf("gobtl: %w", conf.Err(diags))
		}
		opts.Config = cfg
		desc["stack"] = strings.Join(cfg.Files, ",")
		desc["protocol"] = string(cfg.Job.Protocol)
		for _, b := range cfg.BTLs {
			for _, name := range b.Params.Names() {
				if b.Params.IsSet(name) {
					d, _ := b.Params.Param(name)
					v, _ := b.Params.Value(name)
					desc[fmt.Sprintf("btl.%s.%s.%s", b.Kind, b.Name, name)] = core.FormatValue(d.Type, v)
				}
			}
		}
	}
	c, err := gobtl.Init(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	return c, desc, nil
}
