// Command binding serves the built-in scheduling policy binding
// (policies/sched, seed 001 §4.4–4.5) as a plugin: `policy "sched" {
// plugin = "binding" }` runs the same code as `builtin = "binding"`, in its
// own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/sched"
)

func main() { sdk.ServeBuiltin(core.KindSched, "binding") }
