// Package devinit opens a communicator from the launcher's environment
// with the sm BTL and the PML, for the programs of this branch until the
// root package's gobtl.Init lands; then it goes away.
//
// Environment: GOBTL_PROTOCOL (rdma_read, rdma_write, rdma_read_async,
// pipeline), GOBTL_SPIN (the waiter's busy polls) and GOBTL_SM_<PARAM>=value
// for sm parameters.
package devinit

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/btl/sm"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/launch"
	"github.com/gobtl/gobtl/pml"
	"github.com/rs/zerolog"
)

// Open returns this rank's communicator.
func Open(ctx context.Context) (*pml.Comm, error) {
	var b core.Bootstrap
	c, ok, err := boot.FromEnv(ctx)
	switch {
	case err != nil:
		return nil, err
	case ok:
		b = c
	default:
		b = boot.Group(1, launch.NewJobID())[0]
	}
	p := core.MustParams(sm.Params)
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if name, ok := strings.CutPrefix(k, "GOBTL_SM_"); ok {
			if err := p.SetText(strings.ToLower(name), v); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel)
	metrics := core.NewMetrics()
	mods, err := sm.Open(core.BTLEnv{Instance: "", Params: p, Boot: b, Log: log, Metrics: metrics})
	if err != nil {
		return nil, err
	}
	if err := b.Fence(ctx); err != nil {
		return nil, err
	}
	opts := pml.Options{Log: log, Metrics: metrics}
	if s := os.Getenv("GOBTL_PROTOCOL"); s != "" {
		if opts.Protocol, err = pml.ParseProtocol(s); err != nil {
			return nil, err
		}
	}
	if n, err := strconv.Atoi(os.Getenv("GOBTL_SPIN")); err == nil {
		opts.Backoff = pml.DefaultBackoff
		opts.Backoff.Spin = n
	}
	return pml.New(b.Rank(), b.Size(), mods, opts)
}
