//go:build !amd64

package sm

import "sync/atomic"

// storeRelease64 is a release store; elsewhere than amd64 the sequentially
// consistent store provides it.
func storeRelease64(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }

// storeRelease32 is a release store of a 32-bit word.
func storeRelease32(addr *uint32, v uint32) { atomic.StoreUint32(addr, v) }
