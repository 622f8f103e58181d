// Command static serves InfiniBand's static flow control (policies/flowcontrol/static, seed 000 §4)
// as a plugin: `policy "flow_control" { plugin = "static" }` runs the same
// code as `builtin = "static"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/static"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "static") }
