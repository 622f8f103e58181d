//go:build race

package softrc

import "sync/atomic"

// wireOrder makes the ordering the wire provides visible to the race
// detector, which does not see through sockets: what a device did before
// it wrote to a link happens before what a device does after reading
// from it, as a NIC's DMA and doorbells order memory. Only race builds pay
// for it.
var wireOrder atomic.Uint64

func wireWritten() { wireOrder.Add(1) }

func wireRead() { wireOrder.Load() }

// raceBuild tells tests whose subject is timing that the race detector
// slows every poll several times over.
const raceBuild = true
