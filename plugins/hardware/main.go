// Command hardware serves InfiniBand's hardware flow control (policies/flowcontrol/hardware, seed 000 §4)
// as a plugin: `policy "flow_control" { plugin = "hardware" }` runs the same
// code as `builtin = "hardware"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/hardware"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "hardware") }
