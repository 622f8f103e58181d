package main

import (
	"fmt"

	"github.com/gobtl/gobtl/launch"
	"github.com/spf13/cobra"
)

var cleanCmd = &cobra.Command{
	Use:   "clean",
	Short: "remove what dead gobtl jobs left in /dev/shm and the temp directory (like orte-clean)",
	Long: `Clean removes, of your own files only, what gobtl jobs and plugins that are gone
left behind, and prints each path it removed:

  - boot directories $TMPDIR/gobtl-boot-<pid>-<start>-* and plugin socket
    directories $TMPDIR/gobtl-plugin-<pid>-<start>-* whose owner process is dead,
    with the /dev/shm files of those jobs, and the boot and plugin directories
    of older gobtl ($TMPDIR/gobtl-<job>-<pid>-<start>, gobtl-<job>-<n>,
    gobtl-plugin-<n>) whose owner is dead or whose sockets
    nobody listens on;
  - /dev/shm/gobtl-* files that no process maps or holds open (jobs started by
    mpirun or srun, programs killed while they started) and that are older
    than 30 seconds.

Clean sees the processes of its own PID namespace: on a host whose /dev/shm
is shared with containers it cannot see into, do not run it while their jobs
run.

A running job's files are never touched: its launcher is alive, or its ranks
map their files. Jobs leave nothing once started (the launcher removes its boot
directory after the last rank's hello, and the transports unlink their files
after the mapping fence); what a job killed during start-up leaves, the next
gobtl run removes too.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		removed, err := launch.Clean(launch.CleanOptions{Orphans: true})
		for _, p := range removed {
			fmt.Fprintln(cmd.OutOrStdout(), "removed", p)
		}
		if err != nil {
			return fmt.Errorf("clean: %w", err)
		}
		if len(removed) == 0 {
			fmt.Fprintln(cmd.OutOrStdout(), "nothing to clean")
		}
		return nil
	},
}

func init() { rootCmd.AddCommand(cleanCmd) }
