// Command ib_static serves InfiniBand's static flow control (policies/flowcontrol/ib_static, seed 000 §4)
// as a plugin: `policy "flow_control" { plugin = "ib_static" }` runs the same
// code as `builtin = "ib_static"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/ib_static"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "ib_static") }
