package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
	"github.com/gobtl/gobtl/plugins/conformance"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

func init() {
	// `gobtl config check` checks a plugin's body against the plugin's
	// own schema.
	pluginSchema = func(r conf.PluginRef) ([]core.Param, error) {
		return plugins.SchemaIn(r.Kind, r.Name, r.Path, r.PluginDir, r.ConfigDir)
	}
	rootCmd.AddCommand(newPluginsCmd())
}

func newPluginsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "find and verify policy plugins",
		Long: `Policy plugins are separately compiled executables that serve a flow-control,
receive-buffer or scheduling policy; a stack file selects one with
policy "<kind>" { plugin = "name" }. They are searched in the block's
plugin_dir, then $` + plugins.EnvPath + `, then ./` + plugins.DefaultDir + `.`,
	}
	var dirs []string
	list := &cobra.Command{
		Use:   "list",
		Short: "list the plugins found, with their kinds, versions and paths",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			search := append(append([]string(nil), dirs...), plugins.SearchDirs("", "")...)
			cands, err := plugins.Candidates(search)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tKINDS\tVERSION\tPROTOCOL\tPATH")
			bad := 0
			for _, cand := range cands {
				info, err := plugins.Probe(c.Context(), cand.Path, zerolog.Nop())
				if err != nil {
					bad++
					fmt.Fprintf(c.ErrOrStderr(), "skipping %s: %v\n", cand.Path, err)
					continue
				}
				name := info.Name
				if name != cand.Name {
					name = fmt.Sprintf("%s (calls itself %s)", cand.Name, info.Name)
				}
				if cand.Shadowed {
					name += " (shadowed)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", name, kindsString(info.Kinds), info.Version, info.Protocol, cand.Path)
			}
			w.Flush()
			if len(cands) == 0 {
				fmt.Fprintf(c.ErrOrStderr(), "no plugins in %s (build the built-in ones with `make plugins`)\n", strings.Join(search, ", "))
			}
			return nil
		},
	}
	list.Flags().StringSliceVar(&dirs, "dir", nil, "also search this directory, first (repeatable)")

	var (
		params   []string
		events   int
		seed     uint64
		deadline time.Duration
		verbose  bool
	)
	verify := &cobra.Command{
		Use:   "verify PATH...",
		Short: "run the policy conformance suite against plugin executables",
		Long: `verify starts each plugin as a job would and, for every policy kind it serves,
sets it up, drives it with random event streams and checks every decision
against the invariants the mechanism relies on (credits only for posted
buffers, weights finite, non-negative and normalised, answers within the
deadline), then kills it with SIGKILL mid-stream and starts it again.
Exit status 1 if any check fails.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			kv := map[string]string{}
			for _, p := range params {
				k, v, ok := strings.Cut(p, "=")
				if !ok {
					return fmt.Errorf("--param %q: want name=value", p)
				}
				kv[k] = v
			}
			o := conformance.Options{Params: kv, Events: events, Seed: seed, Deadline: deadline}
			if verbose {
				l := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.DebugLevel)
				o.Log = &l
			}
			failed := false
			for _, path := range args {
				r, err := conformance.Verify(context.Background(), path, o)
				if err != nil {
					fmt.Fprintf(c.OutOrStdout(), "FAIL  %s: %v\n", path, err)
					failed = true
					continue
				}
				r.Write(c.OutOrStdout())
				failed = failed || !r.Passed()
			}
			if failed {
				return exitError{1}
			}
			return nil
		},
	}
	verify.Flags().StringArrayVar(&params, "param", nil, "a value for the plugin's configuration body, name=value (repeatable)")
	verify.Flags().IntVar(&events, "events", 20000, "events per random stream")
	verify.Flags().Uint64Var(&seed, "seed", 1, "seed of the random streams")
	verify.Flags().DurationVar(&deadline, "deadline", time.Second, "longest a batch of events may go unanswered")
	verify.Flags().BoolVarP(&verbose, "verbose", "v", false, "show the host's and the plugin's log")

	cmd.AddCommand(list, verify)
	return cmd
}

func kindsString(ks []core.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}
