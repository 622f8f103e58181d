// Command adaptive_striping serves the built-in scheduling policy adaptive_striping
// (policies/sched, seed 001 §4.4–4.5) as a plugin: `policy "sched" {
// plugin = "adaptive_striping" }` runs the same code as `builtin = "adaptive_striping"`, in its
// own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/sched"
)

func main() { sdk.ServeBuiltin(core.KindSched, "adaptive_striping") }
