// Command even_striping serves the built-in scheduling policy even_striping
// (policies/sched, seed 001 §4.4–4.5) as a plugin: `policy "sched" {
// plugin = "even_striping" }` runs the same code as `builtin = "even_striping"`, in its
// own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/sched"
)

func main() { sdk.ServeBuiltin(core.KindSched, "even_striping") }
