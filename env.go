package gobtl

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
)

// processStart is when the Go runtime initialized this package, shortly
// after exec: the zero of the start-up metrics (core.MetricInit*).
var processStart = time.Now()

// bootstrapFromEnv returns the bootstrap the environment names, in
// boot.Open's order: `gobtl run`, PMIx (mpirun, srun --mpi=pmix), PMI-2 or
// PMI-1 (srun --mpi=pmi2, mpiexec.hydra). ok is false, with no error, for
// a program started alone.
func bootstrapFromEnv(ctx context.Context) (core.Bootstrap, bool, error) {
	b, kind, err := boot.Open(ctx)
	if err != nil {
		return nil, true, err
	}
	return b, kind != boot.KindSingleton, nil
}

var localJobs atomic.Int64

// localJob returns the bootstraps of an n-rank job whose ranks are
// goroutines of this process, under a job id no other job on this host
// has (it names the job's fabric and any segment a BTL creates).
func localJob(n int) []core.Bootstrap {
	return boot.Group(n, fmt.Sprintf("local-%d-%d", os.Getpid(), localJobs.Add(1)))
}
