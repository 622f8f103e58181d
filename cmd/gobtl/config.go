package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// pluginSchema asks the plugin host for a policy plugin's schema, so that
// `config check` can check plugin bodies too. It is nil until the plugin
// host is compiled into the command (it sets this from its own file's
// init); plugin bodies are then reported as not checked.
var pluginSchema func(ref conf.PluginRef) ([]core.Param, error)

func init() { rootCmd.AddCommand(newConfigCmd()) }

// configFlags are the flags check and show share.
type configFlags struct {
	vars  []string
	merge bool
}

func (f *configFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.vars, "var", nil, "set a variable: --var name=value (repeatable; wins over GOBTL_VAR_name)")
	cmd.Flags().BoolVarP(&f.merge, "merge", "m", false, "load all arguments as one configuration instead of one each")
}

func (f *configFlags) options() (conf.Options, error) {
	opts := conf.Options{Vars: map[string]string{}, PluginSchema: pluginSchema}
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
// configuration, unless --merge makes them one.
func (f *configFlags) configurations(args []string) [][]string {
	if f.merge {
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
		c, diags := conf.Load(opts, paths...)
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

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "check stack files and show the effective configuration",
		Long: `Check HCL stack files and show the configuration they produce.

Each PATH is one configuration: a file, or a directory whose *.hcl files
together form one (as in Terraform). --merge loads all PATHs as one.
Variables are set with --var name=value or GOBTL_VAR_name=value.`,
	}
	cmd.AddCommand(newConfigCheckCmd(), newConfigShowCmd())
	return cmd
}

func newConfigCheckCmd() *cobra.Command {
	var f configFlags
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
		Use:   "show PATH...",
		Short: "print the effective configuration, defaults filled in, as HCL (or --json)",
		Args:  cobra.MinimumNArgs(1),
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
