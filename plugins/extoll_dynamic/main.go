// Command extoll_dynamic serves EXTOLL's dynamic credit flow control (policies/flowcontrol/extoll_dynamic, seed 003 §6)
// as a plugin: `policy "flow_control" { plugin = "extoll_dynamic" }` runs the same
// code as `builtin = "extoll_dynamic"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "extoll_dynamic") }
