package boot

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/gobtl/gobtl/boot/pmi"
	"github.com/gobtl/gobtl/boot/pmix"
	"github.com/gobtl/gobtl/core"
)

// Kind names where a rank's bootstrap comes from.
type Kind string

// The bootstraps Open knows, in the order it tries them.
const (
	// KindLauncher is `gobtl run` (EnvBoot): ranks of one host.
	KindLauncher Kind = "gobtl run"
	// KindPMIx is a PMIx server: Open MPI's mpirun, srun --mpi=pmix
	// (package pmix, build tag pmix).
	KindPMIx Kind = "pmix"
	// KindPMI is PMI-2 or PMI-1 on PMI_FD or PMI_PORT: srun --mpi=pmi2,
	// MPICH's mpiexec.hydra (package pmi).
	KindPMI Kind = "pmi"
	// KindSingleton is a program started alone: a job of one rank.
	KindSingleton Kind = "singleton"
)

// Detect says which bootstrap the environment getenv (os.Getenv)
// describes, in the order gobtl.Init tries them: `gobtl run`, PMIx
// (PMIX_NAMESPACE and PMIX_RANK), PMI-2/PMI-1 (PMI_FD or PMI_PORT, with
// PMI_RANK and PMI_SIZE), else a singleton. It fails on an environment
// that shows an engine started several ranks but gave them no way to
// find each other — srun without --mpi — rather than let each run alone
// as a job of one rank.
func Detect(getenv func(string) string) (Kind, error) {
	switch {
	case getenv(EnvBoot) != "":
		return KindLauncher, nil
	case pmix.Present(getenv):
		return KindPMIx, nil
	case pmi.Present(getenv):
		return KindPMI, nil
	}
	if n, err := strconv.Atoi(getenv("SLURM_STEP_NUM_TASKS")); err == nil && n > 1 && getenv("SLURM_PROCID") != "" {
		return "", fmt.Errorf("boot: srun started %d tasks without a PMI for them to wire up through (SLURM_MPI_TYPE=%q): "+
			"run with srun --mpi=pmix (programs built with -tags pmix) or srun --mpi=pmi2", n, getenv("SLURM_MPI_TYPE"))
	}
	return KindSingleton, nil
}

// Open returns the bootstrap of the process's environment (Detect) and
// its kind; for KindSingleton it returns no bootstrap, the caller making
// the job of one rank it wants.
func Open(ctx context.Context) (core.Bootstrap, Kind, error) {
	kind, err := Detect(os.Getenv)
	if err != nil {
		return nil, "", err
	}
	var b core.Bootstrap
	switch kind {
	case KindLauncher:
		var c *Client
		if c, _, err = FromEnv(ctx); err == nil {
			b = c
		}
	case KindPMIx:
		b, err = pmix.FromEnv(ctx)
	case KindPMI:
		var c *pmi.Client
		if c, err = pmi.FromEnv(ctx); err == nil {
			b = c
		}
	}
	if err != nil {
		return nil, kind, fmt.Errorf("boot: %s: %w", kind, err)
	}
	return b, kind, nil
}
