// Command ib_dynamic serves InfiniBand's dynamic flow control (policies/flowcontrol/ib_dynamic, seed 000 §4)
// as a plugin: `policy "flow_control" { plugin = "ib_dynamic" }` runs the same
// code as `builtin = "ib_dynamic"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/ib_dynamic"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "ib_dynamic") }
