package ib

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// Kill makes the process behind an ib module on softrc look dead to its
// peers, for tests: its port goes down (every connection closes without a
// goodbye) and the module closes.
func Kill(m core.Module) error {
	x, ok := m.(*module)
	if !ok {
		return fmt.Errorf("ib: Kill: %T is not an ib module", m)
	}
	if x.h.soft == nil {
		return fmt.Errorf("ib: Kill: module %s is not on softrc", x.id)
	}
	if err := x.h.soft.KillPort(x.port); err != nil {
		return err
	}
	return x.Close()
}
