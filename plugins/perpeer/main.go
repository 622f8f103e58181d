// Command perpeer serves the built-in receive-buffer policy perpeer
// (policies/recvbuf/perpeer, seed 002) as a plugin: `policy "recvbuf" {
// plugin = "perpeer" }` runs the same code as `builtin = "perpeer"`, in its own
// process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/recvbuf/perpeer"
)

func main() { sdk.ServeBuiltin(core.KindRecvBuf, "perpeer") }
