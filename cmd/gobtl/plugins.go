package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
	"github.com/gobtl/gobtl/plugins/conformance"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

func init() { rootCmd.AddCommand(newPluginsCmd()) }

// newPluginsCmd is `gobtl plugins`, with its list and verify commands.
func newPluginsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "find and verify policy plugins",
		Long: `Policy plugins are separately compiled executables that serve a flow-control,
receive-buffer or scheduling policy; a stack file selects one with
policy "<kind>" { plugin = "name" }. They are searched, in order, in the
block's plugin_dir (relative to the stack file), each directory of
$` + plugins.EnvPath + `, ` + plugins.ExeDir + `/ next to the running executable, the
install prefix's lib/gobtl/plugins (` + plugins.PrefixDir + ` from the
executable's directory, where make install puts them), then ./` + plugins.DefaultDir + `.`,
	}
	cmd.AddCommand(newPluginsListCmd(), newPluginsVerifyCmd())
	return cmd
}

// newPluginsListCmd is `gobtl plugins list`.
func newPluginsListCmd() *cobra.Command {
	var dirs []string
	list := &cobra.Command{
		Use:   "list",
		Short: "list every directory searched and the plugins found, with their kinds, versions and paths",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return listPlugins(c, dirs) },
	}
	list.Flags().StringSliceVar(&dirs, "dir", nil, "also search this directory, first (repeatable)")
	return list
}

// listPlugins prints the directories searched (dirs first, then the
// default search path), what each holds, and every plugin found there as
// it describes itself when started.
func listPlugins(c *cobra.Command, dirs []string) error {
	search := make([]plugins.Dir, 0, len(dirs))
	for _, d := range dirs {
		search = append(search, plugins.Dir{Path: d, Origin: "--dir"})
	}
	search = plugins.Unique(append(search, plugins.Search("", "")...))
	paths := make([]string, len(search))
	for i, d := range search {
		paths[i] = d.Path
	}
	cands, err := plugins.Candidates(paths)
	if err != nil {
		return err
	}
	out := c.OutOrStdout()
	fmt.Fprintln(out, "searched, in order (a stack's plugin_dir comes first):")
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	for _, d := range search {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", d.Origin, d.Path, dirState(d.Path, cands))
	}
	w.Flush()
	fmt.Fprintln(out)
	writePluginTable(c, cands)
	if len(cands) == 0 {
		fmt.Fprintf(c.ErrOrStderr(), "no plugins found (build the built-in ones with `make plugins`, or install them with `make install`)\n")
	}
	return nil
}

// writePluginTable starts each candidate to ask its name, kinds, version
// and protocol, and prints them a line each; one that does not answer is
// skipped, saying why.
func writePluginTable(c *cobra.Command, cands []plugins.Candidate) {
	w := tabwriter.NewWriter(c.OutOrStdout(), 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tKINDS\tVERSION\tPROTOCOL\tPATH")
	for _, cand := range cands {
		info, err := plugins.Probe(c.Context(), cand.Path, zerolog.Nop())
		if err != nil {
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
}

// verifyFlags are the flags of `gobtl plugins verify`.
type verifyFlags struct {
	params   []string
	events   int
	seed     uint64
	deadline time.Duration
	verbose  bool
}

// newPluginsVerifyCmd is `gobtl plugins verify`.
func newPluginsVerifyCmd() *cobra.Command {
	var f verifyFlags
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
		RunE: func(c *cobra.Command, args []string) error { return f.verify(c, args) },
	}
	verify.Flags().StringArrayVar(&f.params, "param", nil, "a value for the plugin's configuration body, name=value (repeatable)")
	verify.Flags().IntVar(&f.events, "events", 20000, "events per random stream")
	verify.Flags().Uint64Var(&f.seed, "seed", 1, "seed of the random streams")
	verify.Flags().DurationVar(&f.deadline, "deadline", time.Second, "longest a batch of events may go unanswered")
	verify.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "show the host's and the plugin's log")
	return verify
}

// verify runs the conformance suite against each plugin of paths and
// prints its report; any failure makes the exit status 1.
func (f *verifyFlags) verify(c *cobra.Command, paths []string) error {
	kv := map[string]string{}
	for _, p := range f.params {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("--param %q: want name=value", p)
		}
		kv[k] = v
	}
	o := conformance.Options{Params: kv, Events: f.events, Seed: f.seed, Deadline: f.deadline}
	if f.verbose {
		l := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.DebugLevel)
		o.Log = &l
	}
	failed := false
	for _, path := range paths {
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
}

// dirState says what a searched directory holds.
func dirState(dir string, cands []plugins.Candidate) string {
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return "(does not exist)"
	case !st.IsDir():
		return "(not a directory)"
	}
	n := 0
	for _, c := range cands {
		if filepath.Dir(c.Path) == filepath.Clean(dir) {
			n++
		}
	}
	if n == 1 {
		return "(1 plugin)"
	}
	return fmt.Sprintf("(%d plugins)", n)
}

func kindsString(ks []core.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}
