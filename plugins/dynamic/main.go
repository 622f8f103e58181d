// Command dynamic serves InfiniBand's dynamic flow control (policies/flowcontrol/dynamic, seed 000 §4)
// as a plugin: `policy "flow_control" { plugin = "dynamic" }` runs the same
// code as `builtin = "dynamic"`, in its own process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/dynamic"
)

func main() { sdk.ServeBuiltin(core.KindFlowControl, "dynamic") }
