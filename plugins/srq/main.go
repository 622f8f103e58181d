// Command srq serves the built-in receive-buffer policy srq
// (policies/recvbuf/srq, seed 002) as a plugin: `policy "recvbuf" {
// plugin = "srq" }` runs the same code as `builtin = "srq"`, in its own
// process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
)

func main() { sdk.ServeBuiltin(core.KindRecvBuf, "srq") }
