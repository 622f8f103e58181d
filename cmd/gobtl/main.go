// Command gobtl runs, benchmarks and inspects gobtl jobs: `gobtl run`
// launches ranks, `gobtl bench` runs the osu-style suite, `gobtl config`
// checks stack files, `gobtl info` lists the compiled-in components (like
// ompi_info), `gobtl plugins` finds and verifies policy plugins and
// `gobtl clean` removes what dead jobs left (like orte-clean).
//
// Each subcommand lives in its own file and adds itself to rootCmd from
// init.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "gobtl",
	Short:         "a pluggable message-transport framework in the shape of Open MPI's PML/BTL",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// exitError carries an exit status out of a subcommand without printing a
// second message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	if err := rootCmd.Execute(); err != nil {
		if e, ok := err.(exitError); ok {
			os.Exit(e.code)
		}
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is how the command reports a failure: "gobtl: " and the
// error, whose own prefix says which part failed ("run: ...",
// "bench: ..."). An error from the library already starts with
// "gobtl: " (gobtl.Init's do) and is not prefixed twice.
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "gobtl: ") {
		return msg
	}
	return "gobtl: " + msg
}
