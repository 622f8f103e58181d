// Command extoll_static serves EXTOLL's static credit flow control (policies/flowcontrol/extoll_static, seed 003 §5)
// as a plugin: `policy "flow_control" { plugin = "extoll_static" }` runs the same
// code as `builtin = "extoll_static"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/extoll_static"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "extoll_static") }
