// Command testpolicy serves package testpolicy as a plugin, for gobtl's
// own tests.
package main

import (
	"github.com/gobtl/gobtl/plugins/internal/testpolicy"
	"github.com/gobtl/gobtl/plugins/sdk"
)

func main() { sdk.Serve(testpolicy.Plugin()) }
