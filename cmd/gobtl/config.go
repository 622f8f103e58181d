package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/btl/ofi"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/experiment/simjob"
)

// checkPolicy builds every policy of a stack the way a job's start does
// (a plugin is started, its body decoded against its own schema and its
// own checks run), so that `config check` and `config show` report what a
// job would meet. When nil, plugin bodies are reported as not checked.
var checkPolicy = gobtl.CheckPolicy

func init() { rootCmd.AddCommand(newConfigCmd()) }

// configFlags are the flags check and show share.
type configFlags struct {
	vars  []string
	merge bool
	// start has check start a job of the stack too (startCheck), with
	// the plugin host (checkPolicy), which builds its policies.
	start bool
}

func (f *configFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.vars, "var", nil, "set a variable: --var name=value (repeatable; wins over GOBTL_VAR_name)")
	cmd.Flags().BoolVarP(&f.merge, "merge", "m", false, "load all arguments as one configuration instead of one each")
}

func (f *configFlags) options() (conf.Options, error) {
	opts := conf.Options{Vars: map[string]string{}, CheckPolicy: checkPolicy}
	for _, kv := range f.vars {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return opts, fmt.Errorf("--var %q: want name=value", kv)
		}
		opts.Vars[k] = v
	}
	return opts, nil
}

// configurations groups the arguments: each file or directory is its own
// configuration, unless --merge makes them one. No argument is the
// default stack.
func (f *configFlags) configurations(args []string) [][]string {
	if f.merge || len(args) == 0 {
		return [][]string{args}
	}
	out := make([][]string, len(args))
	for i, a := range args {
		out[i] = []string{a}
	}
	return out
}

// each loads every configuration of args, prints its diagnostics to
// stderr and hands it to fn. It returns exitError{1} when any
// configuration had an error.
func (f *configFlags) each(cmd *cobra.Command, args []string, fn func(i int, paths []string, c *conf.Config, diags hcl.Diagnostics) error) error {
	opts, err := f.options()
	if err != nil {
		return err
	}
	failed := false
	for i, paths := range f.configurations(args) {
		c, diags := load(opts, paths)
		if f.start && opts.CheckPolicy != nil && !diags.HasErrors() {
			diags = append(diags, startCheck(c, startCheckRanks)...)
		}
		if err := conf.WriteDiagnostics(cmd.ErrOrStderr(), diags); err != nil {
			return err
		}
		if err := fn(i, paths, c, diags); err != nil {
			return err
		}
		failed = failed || diags.HasErrors()
	}
	if failed {
		return exitError{1}
	}
	return nil
}

// load loads one configuration; no path is the default stack. `config
// check` adds the advice a loaded stack may need (CheckReach). A
// configuration on the default stack's transports gets the network this
// host would run between nodes (gobtl.WithDefaultNet).
func load(opts conf.Options, paths []string) (*conf.Config, hcl.Diagnostics) {
	var c *conf.Config
	var diags hcl.Diagnostics
	if len(paths) == 0 {
		c, diags = conf.LoadSources(opts) // as a job with no stack file does
	} else if c, diags = conf.Load(opts, paths...); !diags.HasErrors() {
		diags = append(diags, c.CheckReach()...)
	}
	if diags.HasErrors() || !c.DefaultBTLs {
		return c, diags
	}
	// What a job across nodes runs between them on this host.
	net, err := gobtl.WithDefaultNet(c)
	if err != nil {
		return c, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No default network", Detail: err.Error()})
	}
	return net, diags
}

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "check stack files and show the effective configuration",
		Long: `Check HCL stack files and show the configuration they produce.

Each PATH is one configuration: a file, or a directory whose *.hcl files
together form one (as in Terraform). --merge loads all PATHs as one.
Variables are set with --var name=value or GOBTL_VAR_name=value.

A stack adds to the default stack: a configuration without btl blocks
keeps the default transports (` + "`gobtl config show`" + ` with no PATH prints
them), as an MCA parameter changes only what it names. check builds every
policy as a job's start does — a plugin is started (after its sha256 pin
is checked), its body decoded against its own schema and its own checks
run — then starts a job of two ranks of the stack in this process, as a
job's start does: its transports open on this host (the interfaces
if_include names, the directories), its policies set up with the job's
transports and rails; and warns when no transport reaches another
process.`,
	}
	cmd.AddCommand(newConfigCheckCmd(), newConfigShowCmd())
	return cmd
}

// startCheckRanks is the size of the job config check starts.
const startCheckRanks = 2

// startCheck starts a job of ranks ranks on a loaded stack, in this
// process, as a job's start does (gobtl.CheckStart; a simulated stack
// under the simulator, as gobtl sim runs it), and returns what failed:
// the diagnostics of a stack's mistake at its block, else the error.
func startCheck(c *conf.Config, ranks int) hcl.Diagnostics {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if simulated(c) {
		quiet := *c
		quiet.Job.Log = conf.Log{Level: "disabled"}
		_, err = simjob.Run(ctx, simjob.Config{Ranks: ranks, Stack: &quiet, Pattern: "start", Body: func(bench.Comm) error { return nil }})
	} else {
		err = gobtl.CheckStart(ctx, c, ranks)
	}
	if err == nil {
		return nil
	}
	var ce *conf.Error
	if !errors.As(err, &ce) {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "The stack does not start", Detail: err.Error()}}
	}
	if !notBuilt(err) {
		return ce.Diagnostics
	}
	// The job's program, not this command, opens the transport: it may
	// be built with what this gobtl lacks.
	var ws hcl.Diagnostics
	for _, d := range ce.Diagnostics {
		w := *d
		w.Severity = hcl.DiagWarning
		w.Summary = "Start not checked: this gobtl lacks the transport; " + d.Summary
		ws = append(ws, &w)
	}
	return ws
}

// notBuilt says whether a start failed for a transport, or a device
// provider, that this gobtl was built without (build tags ofi,
// rdmacore).
func notBuilt(err error) bool {
	return errors.Is(err, ofi.ErrNotBuilt) || strings.Contains(err.Error(), "verbs: no provider")
}

// simulated says whether a stack's transports run in the simulator (a
// stack that mixes them with others runs nowhere: simjob.Run says so).
func simulated(c *conf.Config) bool {
	for _, b := range c.BTLs {
		if b.Kind == "ib" && b.Params.String("provider") == "sim" || b.Kind == "extoll" && b.Params.String("transport") == "sim" {
			return true
		}
	}
	return false
}

func newConfigCheckCmd() *cobra.Command {
	f := configFlags{start: true}
	cmd := &cobra.Command{
		Use:   "check PATH...",
		Short: "check stack files; exit 1 with file:line:col diagnostics on error",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.each(cmd, args, func(_ int, paths []string, _ *conf.Config, diags hcl.Diagnostics) error {
				name := strings.Join(paths, " ")
				var err error
				switch n := len(diags); {
				case diags.HasErrors():
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", name, plural(countErrors(diags), "error"))
				case n > 0:
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s)\n", name, plural(n, "warning"))
				default:
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", name)
				}
				return err
			})
		},
	}
	f.register(cmd)
	return cmd
}

func newConfigShowCmd() *cobra.Command {
	var f configFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show [PATH...]",
		Short: "print the effective configuration, defaults filled in, as HCL (or --json); no PATH: the default stack",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.each(cmd, args, func(i int, _ []string, c *conf.Config, diags hcl.Diagnostics) error {
				if diags.HasErrors() {
					return nil
				}
				return show(cmd.OutOrStdout(), c, asJSON, i > 0)
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (sizes in bytes, rates in bytes/s) instead of HCL")
	return cmd
}

func show(w io.Writer, c *conf.Config, asJSON, separate bool) error {
	if asJSON {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if separate {
		fmt.Fprintln(w)
	}
	return c.WriteHCL(w)
}

func countErrors(diags hcl.Diagnostics) int {
	n := 0
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			n++
		}
	}
	return n
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
