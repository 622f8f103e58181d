// Command ib_hardware serves InfiniBand's hardware flow control (policies/flowcontrol/ib_hardware, seed 000 §4)
// as a plugin: `policy "flow_control" { plugin = "ib_hardware" }` runs the same
// code as `builtin = "ib_hardware"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/ib_hardware"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "ib_hardware") }
