// Command none serves the flow-control policy none (policies/flowcontrol/none: no software flow control)
// as a plugin: `policy "flow_control" { plugin = "none" }` runs the same
// code as `builtin = "none"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/none"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "none") }
