//go:build !amd64

package release

import "sync/atomic"

// Store64 is a release store; elsewhere than amd64 the sequentially
// consistent store provides it.
func Store64(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }

// Store32 is a release store of a 32-bit word.
func Store32(addr *uint32, v uint32) { atomic.StoreUint32(addr, v) }
