package gobtl

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
)

// bootstrapFromEnv returns the bootstrap `gobtl run` left in the
// environment (package boot): ok is false, with no error, for a program
// started alone.
func bootstrapFromEnv(ctx context.Context) (core.Bootstrap, bool, error) {
	c, ok, err := boot.FromEnv(ctx)
	if !ok || err != nil {
		return nil, ok, err // never a nil *boot.Client in an interface
	}
	return c, true, nil
}

var localJobs atomic.Int64

// localJob returns the bootstraps of an n-rank job whose ranks are
// goroutines of this process, under a job id no other job on this host
// has (it names the job's fabric and any segment a BTL creates).
func localJob(n int) []core.Bootstrap {
	return boot.Group(n, fmt.Sprintf("local-%d-%d", os.Getpid(), localJobs.Add(1)))
}
