package ib

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/ib/softrc"
	"github.com/gobtl/gobtl/core"
)

// Faults returns the softrc device under an ib module and the module's
// port, whose fault hooks (DropLinks, DelayLinks, DropPackets, KillPort)
// tests turn on the wire.
func Faults(m core.Module) (*softrc.Device, uint8, error) {
	x, ok := m.(*module)
	if !ok {
		return nil, 0, fmt.Errorf("ib: Faults: %T is not an ib module", m)
	}
	if x.h.soft == nil {
		return nil, 0, fmt.Errorf("ib: Faults: module %s is not on softrc", x.id)
	}
	return x.h.soft, x.port, nil
}

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
