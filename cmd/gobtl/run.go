package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/launch"
	"github.com/spf13/cobra"
)

const runUsage = `run -np N [-c stack.hcl] [--map-by L] [--bind-to L] [--report-bindings] [--tag-output] [--timeout D] [--] prog [args...]`

var runCmd = &cobra.Command{
	Use:   runUsage,
	Short: "launch N ranks of a program on this host",
	Long: `Run starts N ranks of prog on this host, serves their bootstrap (rank, size and a
key-value exchange with a fence, over a unix socket), forwards their output and
returns the first non-zero exit status. When a rank fails the others are stopped
(SIGTERM, then SIGKILL after a second) and the launcher says which rank failed
and how. The stack is checked once, before any rank starts (as gobtl config
check does): a mistake in it is printed once and no rank runs.

On --timeout, Ctrl-C or SIGTERM the launcher first asks every gobtl rank where
it is (like mpirun --report-state-on-timeout --get-stack-traces): each prints
the call it is blocked in and its caller, its pending requests (peer, tag,
size, protocol and its phase) and its main goroutine's stack; then the job is
stopped. A second Ctrl-C does not wait for the reports.

  -np N, -n N         number of ranks (required)
  -c, --config FILE   stack file (HCL) for gobtl.Init, passed as GOBTL_CONFIG
  --map-by L          core (fill the cores in order, the default), numa or
                      socket (deal the ranks round-robin over them)
  --bind-to L         core, numa (its core's NUMA node), socket or none;
                      default: each rank to its core when the ranks fit the
                      cores, else none (oversubscribed: the launcher says so)
  --report-bindings   print each rank's binding as the job starts
  --tag-output        prefix every output line with [rank]
  --timeout D         stop the job after D (e.g. 30s, 5m); exit status 124

Placement works within the CPUs the launcher was given (taskset, a cgroup),
one rank per core, not per hardware thread; the stack's job { placement { } }
block sets the same (flags take precedence). A rank's Go runtime sizes
GOMAXPROCS to its binding.

Each rank sees GOBTL_RANK, GOBTL_SIZE, GOBTL_JOBID, GOBTL_BOOT and, with -c,
GOBTL_CONFIG.`,
	// -np is not a pflag-style flag, so run parses its own arguments.
	DisableFlagParsing: true,
	RunE: func(cmd *cobra.Command, args []string) error {
		cfg, help, err := parseRunArgs(args)
		if help {
			return cmd.Help()
		}
		if err != nil {
			return fmt.Errorf("run: %w\nusage: gobtl %s", err, runUsage)
		}
		if err := checkStack(cmd.ErrOrStderr(), &cfg); err != nil {
			return err
		}
		cfg.Stdout, cfg.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		defer cancel()
		if st, err := os.Stdin.Stat(); err == nil && st.Mode()&os.ModeCharDevice == 0 {
			// A pipe or file goes to rank 0; a terminal does not, since
			// ranks run in their own process groups and would be stopped
			// reading it.
			cfg.Stdin = os.Stdin
		}
		if cfg.Prog == "gobtl" {
			// `gobtl run -- gobtl bench ...`: this very command, even when
			// it is not on PATH (bin/gobtl in a checkout).
			if _, err := exec.LookPath(cfg.Prog); err != nil {
				if self, err := os.Executable(); err == nil {
					cfg.Prog = self
				}
			}
		}
		res, err := launch.Run(ctx, cfg)
		if err != nil {
			return err
		}
		if res.Status != 0 {
			return exitError{res.Status}
		}
		return nil
	},
}

func init() { rootCmd.AddCommand(runCmd) }

// checkStack loads the job's stack (-c, else $GOBTL_CONFIG) once, in the
// launcher, with the checks `gobtl config check` runs: a mistake in it is
// printed once, and the job does not start, instead of every rank
// printing it as its gobtl.Init fails — a transport that does not open,
// a policy that refuses the job's rails (startCheck). Warnings are
// printed once too. The stack's placement block fills what the flags
// left unset.
func checkStack(w io.Writer, cfg *launch.Config) error {
	stack := cfg.StackFile
	if stack == "" {
		stack = os.Getenv(gobtl.EnvConfig)
	}
	if stack == "" {
		return nil
	}
	c, diags := conf.Load(conf.Options{CheckPolicy: checkPolicy}, strings.Split(stack, ",")...)
	if !diags.HasErrors() && cfg.NP > 1 {
		diags = append(diags, c.CheckReach()...)
	}
	if !diags.HasErrors() {
		diags = append(diags, startCheck(c, min(cfg.NP, startCheckRanks))...)
	}
	if err := conf.WriteDiagnostics(w, diags); err != nil {
		return err
	}
	if diags.HasErrors() {
		return fmt.Errorf("run: the stack has %s; no rank was started", plural(countErrors(diags), "error"))
	}
	pl := c.Job.Placement
	cfg.Place.MapBy = cmp.Or(cfg.Place.MapBy, pl.MapBy)
	cfg.Place.BindTo = cmp.Or(cfg.Place.BindTo, pl.BindTo)
	cfg.Place.Report = cfg.Place.Report || pl.ReportBindings
	return nil
}

// parseRunArgs reads the launcher's flags up to the program name.
func parseRunArgs(args []string) (cfg launch.Config, help bool, err error) {
	value := func(i *int, name string) (string, error) {
		a := args[*i]
		if k := strings.IndexByte(a, '='); k >= 0 {
			return a[k+1:], nil
		}
		if *i+1 >= len(args) {
			return "", fmt.Errorf("%s needs a value", name)
		}
		*i++
		return args[*i], nil
	}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		name := a
		if k := strings.IndexByte(a, '='); k >= 0 {
			name = a[:k]
		}
		switch name {
		case "--":
			i++
			goto prog
		case "-h", "--help", "-help":
			return cfg, true, nil
		case "-np", "--np", "-n", "-N":
			v, err := value(&i, name)
			if err != nil {
				return cfg, false, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return cfg, false, fmt.Errorf("%s %q: want a positive number of ranks", name, v)
			}
			cfg.NP = n
		case "-c", "--config":
			v, err := value(&i, name)
			if err != nil {
				return cfg, false, err
			}
			cfg.StackFile = v
		case "--tag-output", "-tag-output":
			cfg.TagOutput = true
		case "--map-by", "-map-by", "--bind-to", "-bind-to":
			v, err := value(&i, name)
			if err == nil {
				err = placeFlag(&cfg.Place, name, v)
			}
			if err != nil {
				return cfg, false, err
			}
		case "--report-bindings", "-report-bindings":
			cfg.Place.Report = true
		case "--timeout", "-timeout":
			v, err := value(&i, name)
			if err != nil {
				return cfg, false, err
			}
			d, err := core.ParseDuration(v)
			if err != nil || d <= 0 {
				return cfg, false, fmt.Errorf("%s %q: want a positive duration like 30s", name, v)
			}
			cfg.Timeout = d
		default:
			if strings.HasPrefix(a, "-") {
				return cfg, false, fmt.Errorf("unknown flag %s", a)
			}
			goto prog
		}
	}
prog:
	if i >= len(args) {
		return cfg, false, fmt.Errorf("no program to run")
	}
	if cfg.NP == 0 {
		return cfg, false, fmt.Errorf("-np N is required")
	}
	cfg.Prog, cfg.Args = args[i], args[i+1:]
	return cfg, false, nil
}

// placeFlag sets --map-by or --bind-to (name) to v in p, or says why v
// is not a level.
func placeFlag(p *launch.Placement, name, v string) error {
	q := launch.Placement{MapBy: v}
	if strings.HasSuffix(name, "bind-to") {
		q = launch.Placement{BindTo: v}
	}
	if err := q.Check(); err != nil {
		return fmt.Errorf("%s %q: %w", name, v, errors.Unwrap(err))
	}
	p.MapBy, p.BindTo = cmp.Or(q.MapBy, p.MapBy), cmp.Or(q.BindTo, p.BindTo)
	return nil
}
