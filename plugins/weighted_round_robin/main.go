// Command weighted_round_robin serves the built-in scheduling policy weighted_round_robin
// (policies/sched, seed 001 §4.4–4.5) as a plugin: `policy "sched" {
// plugin = "weighted_round_robin" }` runs the same code as `builtin = "weighted_round_robin"`, in its
// own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/sched"
)

func main() { sdk.ServeBuiltin(core.KindSched, "weighted_round_robin") }
