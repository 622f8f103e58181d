package main

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/spf13/cobra"
)

func init() { rootCmd.AddCommand(newVersionCmd()) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print gobtl's version, the revision it was built from and the Go toolchain",
		Long: `Version prints the build of this gobtl binary, from the information the Go
toolchain stamps into it: the module version (a release tag, or a pseudo-version
or "(devel)" for a build from a checkout), the VCS revision and commit time, and
whether the tree had uncommitted changes ("+dirty"). bench --json reports the
same line as "version".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := core.BuildInfo()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "gobtl %s\n", b)
			fmt.Fprintf(w, "module   %s\n", b.Module)
			if b.Revision != "" {
				fmt.Fprintf(w, "revision %s", b.Revision)
				if b.Modified {
					fmt.Fprint(w, " (modified)")
				}
				fmt.Fprintln(w)
				fmt.Fprintf(w, "time     %s\n", b.Time)
			}
			fmt.Fprintf(w, "go       %s\n", b.Go)
			return nil
		},
	}
}
