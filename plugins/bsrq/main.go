// Command bsrq serves the built-in receive-buffer policy bsrq
// (policies/recvbuf/bsrq, seed 002) as a plugin: `policy "recvbuf" {
// plugin = "bsrq" }` runs the same code as `builtin = "bsrq"`, in its own
// process.
package main

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/sdk"
	_ "github.com/gobtl/gobtl/policies/recvbuf/bsrq"
)

func main() { sdk.ServeBuiltin(core.KindRecvBuf, "bsrq") }
